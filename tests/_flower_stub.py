"""`flower up` without processes: its start goes through with every process stubbed."""

from __future__ import annotations

from typing import Any


def stub_flower_deployment(monkeypatch: Any) -> list[str]:
    """Stub the deployment's processes, ports, registration, stop and supervision.

    Returns the list the names of the processes it would have spawned are appended to
    (the SuperLink and one node per site).
    """
    import fedroc.federation.flower.deploy as deploy

    spawned: list[str] = []

    def spawn(self: deploy.LocalDeployment, proc: deploy._Proc) -> None:
        spawned.append(proc.name)
        proc.popen = object()  # type: ignore[assignment]

    monkeypatch.setattr(deploy, "_wait_port", lambda *args: None)
    monkeypatch.setattr(deploy.LocalDeployment, "_spawn", spawn)
    monkeypatch.setattr(deploy.LocalDeployment, "register_sites", lambda self, timeout: None)
    monkeypatch.setattr(deploy.LocalDeployment, "wait_registered", lambda self, n, t: None)
    monkeypatch.setattr(deploy.LocalDeployment, "stop", lambda self: None)
    monkeypatch.setattr(deploy.LocalDeployment, "supervise", lambda self, restart: [])
    return spawned
