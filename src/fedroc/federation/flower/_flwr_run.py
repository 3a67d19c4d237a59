"""Flower's ``flwr run`` command alone: ``python -m fedroc.federation.flower._flwr_run ARGS``.

``flwr``'s CLI imports every one of its commands before it runs one (the chat app, app
publishing, federation management, ...): on the shared 2-core test machine 2.8-3.6 s
before ``flwr run`` starts, against 2.1-2.7 s for the ``run`` command alone, which is what
``fedroc flower run`` needs for every job. The command is Flower's own function
(``flwr.cli.run.run``) behind a one-command Typer app, so its options, output and exit codes
are those of ``flwr run`` (the ``flwr`` app's callback only prints ``--version`` and checks
for updates, which fedroc turns off). :func:`command` falls back to the ``flwr`` executable
on other Flower versions or with ``FEDROC_FLOWER_TUNING=off``.

:func:`stop_run` stops a run past its ``--run-timeout`` with one Control API request from the
analyst's process (Flower 1.41's ``StopRun``, as ``flwr stop`` sends it): starting the
``flwr stop`` command took 5-8 s on the loaded test machine, during which the run kept
calling the sites. Other versions (or tuning off) run ``flwr stop``.
"""

from __future__ import annotations

import sys

__all__ = ["command", "lean", "main", "stop_run"]


def lean() -> bool:
    """Tell whether the lean paths apply (Flower 1.41 installed, tuning not turned off)."""
    from importlib.metadata import PackageNotFoundError, version

    from fedroc.federation.flower._middleware import tuning_enabled
    from fedroc.federation.flower._tuning import SUPPORTED_FLOWER

    try:
        # Not flwr's own version module: importing flwr costs the analyst's process ~1 s.
        supported = version("flwr").startswith(SUPPORTED_FLOWER)
    except PackageNotFoundError:
        supported = False
    return supported and tuning_enabled()


def command(flwr_executable: str) -> list[str]:
    """Build the command that runs ``flwr run`` (append its arguments, without ``run``)."""
    if lean():
        return [sys.executable, "-m", "fedroc.federation.flower._flwr_run"]
    return [flwr_executable, "run"]


def stop_run(address: str, root_certificates: str | None, run_id: int) -> bool:
    """Ask the SuperLink's Control API at ``address`` to stop run ``run_id`` (Flower 1.41).

    ``root_certificates`` is the CA file (None: plain HTTP). Returns Flower's ``success``;
    raises what the request raises (an HTTP error, e.g. for a run that already finished).
    """
    from flwr.cli.cli_client_interceptor import CliClientHttpInterceptor
    from flwr.proto.control_pb2 import StopRunRequest
    from flwr.supercore.control import ControlHttpClient
    from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor

    ca = None
    if root_certificates is not None:
        with open(root_certificates, "rb") as fh:
            ca = fh.read()
    client = ControlHttpClient.from_server_address(
        server_address=address,
        insecure=ca is None,
        root_certificates=ca,
        interceptors=[
            CliClientHttpInterceptor(),
            RuntimeVersionHttpInterceptor(component_name="flwr CLI"),
        ],
    )
    try:
        return bool(client.StopRun(StopRunRequest(run_id=run_id)).success)
    finally:
        client.close()


def main() -> None:
    import typer
    from flwr.cli.run import run

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(run)
    app()


if __name__ == "__main__":
    main()
