"""The shipped deployment files (deploy/flower) refer to commands and options that exist.

Docker cannot run on the test machines (no engine, no compose plugin), so these tests check
what can be checked without one: the compose file parses and every service runs a fedroc
command whose options fedroc's CLI accepts; each Dockerfile target runs as a non-root user,
has a health check and an entry point that the CLI accepts; the systemd units pass
``systemd-analyze verify`` and their ``ExecStart`` lines parse as fedroc commands.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import typer

from fedroc.cli import app

yaml = pytest.importorskip("yaml")

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "flower"


def _accepts(argv: list[str]) -> None:
    """Parse ``fedroc ARGV`` with the CLI's own parser, without running the command."""
    assert argv[0] == "fedroc", argv
    command = typer.main.get_command(app)
    ctx = command.make_context("fedroc", list(argv[1:]), resilient_parsing=False)
    while True:
        with warnings.catch_warnings():  # Click 8.2 deprecates protected_args, still set
            warnings.simplefilter("ignore", DeprecationWarning)
            pending = [*ctx.protected_args, *ctx.args]
        name, sub, rest = command.resolve_command(ctx, pending)  # type: ignore[attr-defined]
        assert sub is not None, argv
        ctx = sub.make_context(name, rest, parent=ctx)
        if not hasattr(sub, "resolve_command"):
            return
        command = sub


def test_the_parser_check_can_fail() -> None:
    import click

    base = ["fedroc", "flower", "supernode", "--superlink", "l:1", "--site", "s", "--data", "d"]
    _accepts(base)
    with pytest.raises(click.exceptions.NoSuchOption):
        _accepts([*base, "--no-such-option", "1"])
    with pytest.raises(click.exceptions.UsageError):
        _accepts(["fedroc", "flower", "no-such-command"])


def _dockerfile_targets() -> dict[str, list[str]]:
    text = (DEPLOY / "Dockerfile").read_text()
    text = re.sub(r"\\\n\s*", " ", text)  # join continuation lines
    targets: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        found = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE)
        if found:
            current = found.group(2) or found.group(1)
            base = found.group(1)
            targets[current] = list(targets.get(base, []))
            continue
        assert current is not None
        targets[current].append(line)
    return targets


def _instruction(lines: list[str], name: str) -> list[str]:
    found = [line for line in lines if line.split(None, 1)[0].upper() == name]
    return found


def test_dockerfile_targets_run_fedroc_as_a_user_with_health_checks() -> None:
    targets = _dockerfile_targets()
    assert {"superlink", "supernode"} <= set(targets)
    base_image = re.search(r"^FROM\s+(\S+)", (DEPLOY / "Dockerfile").read_text(), re.M)
    assert base_image and ":" in base_image.group(1) and not base_image.group(1).endswith(":latest")
    for target in ("superlink", "supernode"):
        lines = targets[target]
        users = _instruction(lines, "USER")
        assert users and users[-1].split()[1] not in ("root", "0"), target
        entry = json.loads(_instruction(lines, "ENTRYPOINT")[-1].split(None, 1)[1])
        cmd = _instruction(lines, "CMD")
        args = json.loads(cmd[-1].split(None, 1)[1]) if cmd else []
        if target == "superlink":
            assert entry == ["fedroc", "flower", "superlink"]
            assert "--enable-supernode-auth" in args and "--database" in args
        else:
            # The site's own options come from the compose service's command.
            _accepts([*entry, "--superlink", "l:9093", "--site", "s", "--data", "/d.csv"])
        health = _instruction(lines, "HEALTHCHECK")[-1]
        probe = json.loads(health[health.index("CMD") + 3 :].strip())
        _accepts(probe)


def test_compose_services_run_commands_the_cli_accepts() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"superlink", "register", "site1", "site2", "site3"} <= set(services)
    entry = {
        t: json.loads(_instruction(lines, "ENTRYPOINT")[-1].split(None, 1)[1])
        for t, lines in _dockerfile_targets().items()
        if _instruction(lines, "ENTRYPOINT")
    }
    for name, service in services.items():
        target = (service.get("build") or {}).get("target") or {
            "fedroc-superlink": "superlink",
            "fedroc-supernode": "supernode",
        }[service["image"]]
        argv = list(service.get("entrypoint") or entry[target]) + list(service.get("command", []))
        if name == "superlink" and "command" not in service:
            continue  # the image's own CMD, checked with the Dockerfile
        _accepts(argv)
    for site in ("site1", "site2", "site3"):
        service = services[site]
        assert service["restart"] == "unless-stopped"
        assert any(v.endswith(":/var/lib/fedroc/node") for v in service["volumes"]), site
        assert service["depends_on"]["register"]["condition"] == "service_completed_successfully"
        # Each site registers and pins its own key under its own name.
        assert f"{site}=/keys/{site}/node-auth.pub" in services["register"]["command"]


def _exec_start(unit: str) -> list[str]:
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "systemd" / unit).read_text())
    line = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(line.split("=", 1)[1])
    if argv[0] == "/bin/sh":
        argv = shlex.split(argv[2].split("||")[0])
    values = {"${FEDROC_SUPERLINK}": "l:9093", "${FEDROC_DATA}": "/d.csv", "%i": "north"}
    out = []
    for arg in argv:
        if arg == "$FEDROC_ARGS":
            out += ["--min-count", "10"]
            continue
        for key, value in values.items():
            arg = arg.replace(key, value)
        out.append(arg)
    assert out[0].endswith("/bin/fedroc")
    return ["fedroc", *out[1:]]


@pytest.mark.parametrize(
    "unit",
    ["fedroc-superlink.service", "fedroc-supernode@.service", "fedroc-supernode-health@.service"],
)
def test_systemd_units_run_commands_the_cli_accepts(unit: str) -> None:
    argv = _exec_start(unit)
    if argv[1:3] == ["flower", "superlink"]:
        assert "--enable-supernode-auth" in argv and "--database" in argv
    else:
        _accepts(argv)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_units_verify(tmp_path: Path) -> None:
    fedroc = str(Path(sys.executable).with_name("fedroc"))
    names = []
    for unit in (DEPLOY / "systemd").iterdir():
        text = unit.read_text().replace("/opt/fedroc/venv/bin/fedroc", fedroc)
        name = unit.name.replace("@.", "@north.")
        (tmp_path / name).write_text(text)
        names.append(name)

    def verify(files: list[str]) -> str:
        proc = subprocess.run(
            ["systemd-analyze", "verify", *files],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        return (proc.stdout + proc.stderr).strip() + ("" if proc.returncode == 0 else " rc!=0")

    assert verify(names) == ""
    # The check can fail: a misspelt setting is reported.
    broken = tmp_path / "broken.service"
    broken.write_text(
        (tmp_path / "fedroc-superlink.service")
        .read_text()
        .replace("Restart=always", "Restart=sometimes")
    )
    assert "restart specifier" in verify(["broken.service"])
