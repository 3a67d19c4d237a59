"""`fedroc mpc share` refuses, by default, a file under a site's minimum count of a class.

Through `fedroc evaluate --method mpc`, a site of 3 rows is refused under its policy's
minimum count q; its owner's own command, `fedroc mpc share`, sealed the same 3 rows for
the proxies without a word (the job's --min-class-count is over all owners' rows, checked
under MPC). Now it refuses a file with fewer than q = 5 (the default policy's min_count)
rows of either class, unless the owner lowers the minimum with --owner-min-count.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedroc.privacy import DisclosurePolicy
from tests._cli import run_main
from tests.test_cli_usability import one_line_error


@pytest.fixture
def share_args(tmp_path: Path, capsys) -> list[str]:
    """The arguments of `fedroc mpc share` but the data file, for owner a of job (a, b)."""
    cluster = tmp_path / "cluster"
    code, _, err = run_main(capsys, ["mpc", "certs", str(cluster), "--owner", "a", "--owner", "b"])
    assert code == 0, err
    return [
        "--cluster", str(cluster / "cluster.toml"), "--owner", "a",
        "--owner-key", str(cluster / "owner-a.key"), "--job", "job-left39-01",
        "--owners", "a,b", "--out", str(tmp_path / "a.share"),
    ]  # fmt: skip


def _file(tmp_path: Path, labels: list[int]) -> Path:
    path = tmp_path / "owner.csv"
    n = len(labels)
    pd.DataFrame({"label": labels, "score": [(i + 0.5) / n for i in range(n)]}).to_csv(
        path, index=False
    )
    return path


def test_the_default_minimum_is_the_default_policys():
    from fedroc.cli.mpc_cmd import DEFAULT_OWNER_MIN_COUNT

    assert DEFAULT_OWNER_MIN_COUNT == DisclosurePolicy().min_count


def test_a_three_row_owner_file_is_refused_by_default(tmp_path, capsys, share_args):
    data = _file(tmp_path, [1, 0, 1])
    code, _, err = run_main(capsys, ["mpc", "share", str(data), *share_args])
    line = one_line_error(code, err)
    q = DisclosurePolicy().min_count
    assert str(data) in line and "1 negative row" in line and f"minimum count {q}" in line, line
    assert "--owner-min-count" in line, line
    assert not (tmp_path / "a.share").exists()


def test_the_owner_may_lower_the_minimum_explicitly(tmp_path, capsys, share_args):
    data = _file(tmp_path, [1, 0, 1])
    code, _, err = run_main(
        capsys, ["mpc", "share", str(data), *share_args, "--owner-min-count", "1"]
    )
    assert code == 0, err
    assert (tmp_path / "a.share").exists()
    code, _, err = run_main(
        capsys, ["mpc", "share", str(data), *share_args, "--owner-min-count", "-1"]
    )
    assert "--owner-min-count" in one_line_error(code, err)


def test_a_file_with_q_rows_of_each_class_is_shared(tmp_path, capsys, share_args):
    q = DisclosurePolicy().min_count
    data = _file(tmp_path, [1] * q + [0] * q)
    code, _, err = run_main(capsys, ["mpc", "share", str(data), *share_args])
    assert code == 0, err
    data = _file(tmp_path, [1] * (q - 1) + [0] * (q + 3))
    code, _, err = run_main(capsys, ["mpc", "share", str(data), *share_args])
    assert f"{q - 1} positive row" in one_line_error(code, err)
