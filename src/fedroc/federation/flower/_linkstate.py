"""The SuperLink's state in memory, its node registrations in a database (Flower 1.41).

Flower 1.41 keeps a SuperLink's state either in memory (lost when it stops) or in SQLite
through SQLAlchemy (``--database PATH``). The SQL state makes every request a handful of
ORM statements: a ROC-GLM job of 3 sites sends about 1,300 requests that ran about 9,700
statements (each task-token cleanup alone is two ORM ``UPDATE``s, run on nearly every Fleet
request), and measured on the same machine in the same run the SQL SuperLink spent 30 s of
CPU on a job that the in-memory one served in 8 s, its rounds 3.7 times faster.

What a SuperLink must not lose in a crash is what a person set up: the registered nodes
(their public keys, names and node ids), so that the sites reconnect by themselves after a
restart. Runs, messages and tasks in flight are lost either way (a job caught by an outage
fails and is resubmitted). :class:`RegistryLinkState` is therefore Flower's own
``InMemoryLinkState`` whose node registrations are written through to an SQLite database
(``fedroc_node_registry``, one row per node, written when a node is registered or
unregistered) and read back when the SuperLink starts: a restarted SuperLink knows every
registered key under the same node id, an unregistered key stays refused, and a node that
was online is registered but offline until its next heartbeat or activation (at once: no
wait for its old heartbeat to expire). What is not kept: the run history (``flwr ls`` lists
the runs since the last start).

``fedroc flower superlink`` uses it by default (``--link-state memory``);
``--link-state sql`` keeps Flower's SQL state, as do ``FEDROC_FLOWER_TUNING=off`` and other
Flower versions. It depends on ``InMemoryLinkState``'s node tables (``nodes``,
``node_public_key_to_node_id``, ``owner_to_node_ids``), hence the version gate.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from flwr.proto.node_pb2 import NodeInfo
from flwr.server.superlink.linkstate.in_memory_linkstate import InMemoryLinkState

__all__ = ["RegistryLinkState", "use_registry_state"]

TABLE = "fedroc_node_registry"


class NodeRegistry:
    """Registered nodes in an SQLite database: ``node_id -> NodeInfo``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (node_id TEXT PRIMARY KEY, info BLOB NOT NULL)"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30.0)
        db.execute("PRAGMA synchronous = FULL")  # a registration survives a power cut
        return db

    def load(self) -> list[Any]:
        with self._connect() as db:
            rows = db.execute(f"SELECT info FROM {TABLE}").fetchall()
        return [NodeInfo.FromString(blob) for (blob,) in rows]

    def save(self, info: Any) -> None:
        db = self._connect()
        try:
            with db:  # one transaction, committed (and synced) on exit
                db.execute(
                    f"INSERT OR REPLACE INTO {TABLE} (node_id, info) VALUES (?, ?)",
                    (str(info.node_id), info.SerializeToString()),
                )
        finally:
            db.close()


class RegistryLinkState(InMemoryLinkState):
    """Flower's in-memory state; node registrations written through to a database."""

    def __init__(self, registry: NodeRegistry, federation_manager: Any, object_store: Any):
        super().__init__(federation_manager, object_store)
        self.registry = registry
        self._write = threading.Lock()
        # Rows are written when a node is registered (status REGISTERED: it becomes online
        # with its next activation or heartbeat) or unregistered (UNREGISTERED: refused).
        for info in registry.load():
            self.nodes[info.node_id] = info
            self.node_public_key_to_node_id[info.public_key] = info.node_id
            self.owner_to_node_ids.setdefault(info.owner_aid, set()).add(info.node_id)

    def _persist(self, node_id: int) -> None:
        with self.lock:
            info = NodeInfo()
            info.CopyFrom(self.nodes[node_id])
        with self._write:
            self.registry.save(info)

    def create_node(self, *args: Any, **kwargs: Any) -> int:
        node_id = int(super().create_node(*args, **kwargs))
        if node_id:
            self._persist(node_id)
        return node_id

    def delete_node(self, owner_aid: str, node_id: int) -> None:
        super().delete_node(owner_aid, node_id)
        self._persist(node_id)


def use_registry_state(registry_path: str | Path | None) -> None:
    """Keep the node registrations of this process's in-memory SuperLink in a database.

    The SuperLink must be started with ``--database :flwr-in-memory:``; without
    ``registry_path`` its state is Flower's plain in-memory state.
    """
    from flwr.server.superlink.linkstate.linkstate_factory import LinkStateFactory
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME

    from fedroc.federation.flower._tuning import check_flower_version

    check_flower_version()
    if registry_path is None:
        return
    registry = NodeRegistry(registry_path)
    original = LinkStateFactory.state
    if getattr(original, "_fedroc", False):
        return

    def state(self: Any) -> Any:
        if self.state_instance is None and self.database == FLWR_IN_MEMORY_DB_NAME:
            with self._state_lock:
                if self.state_instance is None:
                    self.state_instance = RegistryLinkState(
                        registry, self.federation_manager, self.objectstore_factory.store()
                    )
        return original(self)

    state._fedroc = True  # type: ignore[attr-defined]
    state.__wrapped__ = original  # type: ignore[attr-defined]
    LinkStateFactory.state = state  # type: ignore[method-assign]
