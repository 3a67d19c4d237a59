"""A new user's walkthrough of the sequestration service: the custodian's and a developer's
mistakes, each answered with one line that names the field and the value (HTTP 4xx; in the
CLI exit 2, no traceback), and no more than a developer may learn.

Each test says what the service or the CLI answered before.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from fedroc.cli import main
from fedroc.exceptions import InputError
from fedroc.sequester.service import create_app
from tests._sequester_server import ADMIN

pytestmark = pytest.mark.timeout(120)

N = 300


def _client(app, token: str) -> TestClient:
    return TestClient(app, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def app(tmp_path):
    return create_app(str(tmp_path / "seq.db"), ADMIN, rate_limit=0)


def _setup(app, **plan) -> dict:
    rng = np.random.default_rng(3)
    y = (rng.random(N) < 0.3).astype(int)
    s = rng.normal(size=N) + 1.2 * y
    ids = [f"img-{i:04d}" for i in range(N)]
    adm = _client(app, ADMIN)
    r = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y.tolist()})
    assert r.status_code == 201, r.text
    tid = r.json()["test_set_id"]
    body = {"n_subsets": 10, "subset_size": 100, "noise_rate": 0.05, "budget_units": 2,
            "prevalence": 0.3, **plan}  # fmt: skip
    r = adm.post(f"/v1/test-sets/{tid}/plans", json=body)
    assert r.status_code == 201, r.text
    pid = r.json()["plan_id"]
    d = adm.post(f"/v1/plans/{pid}/developers", json={"name": "alice"}).json()
    return {"ids": ids, "y": y, "s": s, "tid": tid, "pid": pid, "token": d["token"],
            "dev_id": d["developer_id"], "adm": adm, "dev": _client(app, d["token"])}  # fmt: skip


def _post_raw(client: TestClient, url: str, text: str):
    return client.post(url, content=text, headers={"Content-Type": "application/json"})


def test_nan_and_null_scores_are_named_plainly(app):
    """Before: ``scores must be finite numbers; 1 are not, such as np.float64(nan) for image
    'img-0005'`` for a NaN and for a null alike (numpy's repr, and a null called nan)."""
    st = _setup(app)
    scores = st["s"].tolist()
    body = json.dumps({"image_ids": st["ids"], "scores": scores})
    for token, shown in (("NaN", "nan"), ("Infinity", "inf"), ("null", "null")):
        r = _post_raw(st["dev"], "/v1/submissions", body.replace(repr(scores[5]), token, 1))
        assert r.status_code == 422, r.text
        msg = r.json()["detail"]
        assert "np.float64" not in msg and "1 are" not in msg, msg
        assert f"scores must be finite numbers; 1 is not: {shown} for image 'img-0005'" == msg


def test_duplicate_image_in_a_submission_is_named(app):
    """Before: ``image_ids lists some image more than once``, without saying which (the
    developer knows every id: GET /v1/me/image-ids lists them)."""
    st = _setup(app)
    ids = [*st["ids"][:-1], st["ids"][7]]
    r = st["dev"].post("/v1/submissions", json={"image_ids": ids, "scores": st["s"].tolist()})
    assert r.status_code == 422
    assert r.json()["detail"] == "image_ids must be unique; 'img-0007' appears more than once"


def test_max_copies_without_replacement_is_not_blamed_on_the_prevalence(app, tmp_path):
    """Before: ``max_copies 3 needs replace=True: without replacement a subset holds each
    image once (the prevalence 0.28 is the set's counted with noise at prevalence_epsilon
    0.236; give prevalence to draw at a set one)``: the note on the prevalence has nothing
    to do with max_copies, and sends the custodian to the wrong field."""
    st = _setup(app)
    body = {"n_subsets": 10, "subset_size": 100, "noise_rate": 0.05, "budget_units": 2,
            "replace": False, "max_copies": 3}  # fmt: skip
    r = st["adm"].post(f"/v1/test-sets/{st['tid']}/plans", json=body)
    assert r.status_code == 422
    msg = r.json()["detail"]
    assert msg.startswith('max_copies 3 needs "replace": true'), msg
    assert "prevalence" not in msg, msg
    # A shortfall of one class is about the prevalence: there the note stays.
    body = {"n_subsets": 10, "subset_size": 600, "noise_rate": 0.05, "budget_units": 2,
            "replace": False}  # fmt: skip
    r = st["adm"].post(f"/v1/test-sets/{st['tid']}/plans", json=body)
    assert r.status_code == 422 and "give prevalence to draw at a set one" in r.json()["detail"]


def test_spent_budget_says_who_can_top_it_up(app):
    """Before: ``budget spent: developer 'alice' has used every unit of the budget of this
    plan; the test set answers no more queries``; the quotas' refusals say "ask the
    custodian for more", and a top-up does make it answer again."""
    st = _setup(app, mechanism="laplace")
    sid = (
        st["dev"]
        .post("/v1/submissions", json={"image_ids": st["ids"], "scores": st["s"].tolist()})
        .json()["submission_id"]
    )
    for k in (1, 2):
        assert st["dev"].post("/v1/queries", json={"submission_id": sid, "subset_id": k}).is_success
    r = st["dev"].post("/v1/queries", json={"submission_id": sid, "subset_id": 3})
    assert r.status_code == 403
    msg = r.json()["detail"]
    assert msg.startswith("budget spent") and "ask the custodian" in msg, msg
    st["adm"].post(f"/v1/developers/{st['dev_id']}/top-up", json={"budget_units": 1})
    assert st["dev"].post("/v1/queries", json={"submission_id": sid, "subset_id": 3}).is_success


def test_top_up_of_nothing_is_refused(app):
    """Before: ``POST /v1/developers/1/top-up`` with ``{}`` (or every field 0) answered 200
    and recorded a top-up that added nothing; a custodian who misspelt nothing but sent
    the units as ``"budget"`` got 422, but one who sent an empty body got silence."""
    st = _setup(app)
    url = f"/v1/developers/{st['dev_id']}/top-up"
    for body in ({}, {"budget_units": 0, "queries": 0, "submissions": 0}):
        r = st["adm"].post(url, json=body)
        assert r.status_code == 422, r.text
        assert r.json()["detail"] == (
            "a top-up needs budget_units, queries or submissions above 0; got all 0"
        )
    actions = [a["action"] for a in st["adm"].get("/v1/audit/actions").json()]
    assert "top-up" not in actions


def test_rotating_a_revoked_token_says_it_reactivates(app):
    """Before: ``/rotate`` on a revoked developer answered ``{"developer_id": 2, "token":
    ...}`` and silently made them active again (the docs said only "the old one stops
    working at once"); the audit recorded a plain ``rotate-token``. Now the answer, the
    docs and the audit say so."""
    st = _setup(app)
    did = st["dev_id"]
    assert st["adm"].post(f"/v1/developers/{did}/revoke").json()["active"] is False
    r = st["adm"].post(f"/v1/developers/{did}/rotate").json()
    assert r["active"] is True and r["reactivated"] is True
    assert _client(app, r["token"]).get("/v1/me").status_code == 200
    r = st["adm"].post(f"/v1/developers/{did}/rotate").json()
    assert r["active"] is True and r["reactivated"] is False
    details = [
        a["details"]
        for a in st["adm"].get("/v1/audit/actions").json()
        if a["action"] == "rotate-token"
    ]
    assert details == [{"reactivated": True}, {"reactivated": False}]
    doc = st["adm"].get("/openapi.json").json()["paths"]["/v1/developers/{developer_id}/rotate"]
    assert "revoked" in doc["post"]["description"]


def test_list_of_wrong_types_is_one_short_line(app):
    """Before: integer image ids gave ``image_ids.0: Input should be a valid string;
    image_ids.1: ...`` ten times over and ``; and 590 more``."""
    adm = _client(app, ADMIN)
    r = adm.post("/v1/test-sets", json={"image_ids": list(range(600)), "labels": [0, 1] * 300})
    assert r.status_code == 422
    assert r.json()["detail"] == (
        "image_ids.0: Input should be a valid string; got 0 "
        "(and 599 more entries of image_ids alike)"
    )
    # Different errors are still all named.
    r = adm.post("/v1/test-sets", json={"image_ids": [1, "b"], "labels": [0, 0.5]})
    assert r.json()["detail"] == (
        "image_ids.0: Input should be a valid string; got 1; "
        "labels.1: Input should be a valid integer, got a number with a fractional part; got 0.5"
    )


def test_schema_refusals_name_the_value(app):
    """Before: a value the schema refuses was named by its field only, ``subset_id: Input
    should be greater than or equal to 1`` for subset 0, ``scores.0: Input should be a valid
    number, unable to parse string as a number`` for "abc", ``developer_id: ...`` for
    /v1/developers/abc/revoke: the developer had to find the value in the request."""
    st = _setup(app)
    r = st["dev"].post("/v1/queries", json={"submission_id": 1, "subset_id": 0})
    assert r.status_code == 422
    assert r.json()["detail"] == "subset_id: Input should be greater than or equal to 1; got 0"
    scores = ["abc", *st["s"][1:].tolist()]
    r = st["dev"].post("/v1/submissions", json={"image_ids": st["ids"], "scores": scores})
    assert r.status_code == 422
    assert r.json()["detail"].endswith('unable to parse string as a number; got "abc"'), r.text
    r = _post_raw(st["dev"], "/v1/queries", '{"submission_id": 1, "subset_id": 1, '
                  '"reference_auc": NaN}')  # fmt: skip
    assert r.json()["detail"] == "reference_auc: Input should be a finite number; got NaN"
    r = st["adm"].post("/v1/developers/abc/revoke")
    assert r.status_code == 422 and r.json()["detail"].endswith('; got "abc"'), r.text
    # A long string is cut; an object, a list or a missing field shows no value.
    r = st["adm"].post("/v1/developers/1/top-up", json={"budget_units": "x" * 100})
    assert r.json()["detail"].endswith('; got "' + "x" * 36 + "..."), r.text
    r = st["adm"].post("/v1/developers/1/top-up", json={"budget_units": [1]})
    assert "got" not in r.json()["detail"].split(":", 1)[1].replace("valid integer", ""), r.text
    r = st["dev"].post("/v1/submissions", json={"scores": st["s"].tolist()})
    assert r.json()["detail"] == "image_ids: Field required", r.text


def test_query_fields_are_described_in_the_docs(app):
    """Before: /docs gave submission_id and subset_id no description; subsets are numbered
    from 1 (0 answered ``subset_id: Input should be greater than or equal to 1``)."""
    schema = _client(app, ADMIN).get("/openapi.json").json()["components"]["schemas"]["QueryIn"]
    assert "1..n_subsets" in schema["properties"]["subset_id"]["description"]
    assert "POST /v1/submissions" in schema["properties"]["submission_id"]["description"]


def test_plan_cli_refuses_subsets_that_cannot_be_drawn(capsys):
    """Before: ``fedroc sequester plan --images 600 --subsets 20 --subset-size 900
    --noise-rate 1.6 --max-copies 1`` printed a plan (exit 0); the service refuses it (900
    images without repeats from 600)."""
    with pytest.raises(SystemExit) as exc:
        main(["sequester", "plan", "--images", "600", "--subsets", "20", "--subset-size",
              "900", "--noise-rate", "1.6", "--max-copies", "1"])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "--subset-size 900 cannot be drawn with --max-copies 1 from --images 600" in err
    main(["sequester", "plan", "--images", "600", "--subsets", "20", "--subset-size", "900",
          "--noise-rate", "1.6", "--max-copies", "2", "--json"])  # fmt: skip
    assert json.loads(capsys.readouterr().out)["max_copies"] == 2


def test_serve_refuses_a_port_it_cannot_listen_on(monkeypatch, tmp_path, capsys):
    """Before: ``--port 99999`` printed ``serving ... on http://127.0.0.1:99999`` and hung;
    a port in use printed the same, then uvicorn's ``ERROR: [Errno 98] ...`` and exit 1."""
    import uvicorn

    def _served(*_a, **_k):
        raise AssertionError("uvicorn.run was reached")

    monkeypatch.setattr(uvicorn, "run", _served)
    monkeypatch.setenv("FEDROC_SEQUESTER_ADMIN_TOKEN", ADMIN)
    base = ["sequester", "serve", "--db", str(tmp_path / "s.db"), "--host", "127.0.0.1"]
    with pytest.raises(SystemExit) as exc:
        main([*base, "--port", "99999"])
    assert exc.value.code == 2
    assert "--port must lie in 1..65535; got 99999" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(SystemExit) as exc:
            main([*base, "--port", str(port)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--port {port} on --host 127.0.0.1 cannot be listened on" in err, err
    assert "Traceback" not in err


def test_token_without_bearer_is_told_the_header_format(app):
    """Before: ``curl -H "Authorization: fsq_..."`` (the token without ``Bearer``) answered
    401 ``missing bearer token`` though a token was sent. The token is never echoed."""
    st = _setup(app)
    r = TestClient(app).get("/v1/budget", headers={"Authorization": st["token"]})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    msg = r.json()["detail"]
    assert msg == "the Authorization header must read 'Bearer <token>'", msg
    assert st["token"] not in r.text
    r = TestClient(app).get("/v1/budget")
    assert r.json()["detail"] == "missing bearer token: send 'Authorization: Bearer <token>'"


def test_form_encoded_body_is_told_to_send_json(app):
    """Before: ``curl -d '{"submission_id": 1, ...}'`` without ``-H 'Content-Type:
    application/json'`` (curl sends a form) answered ``body: Input should be a valid
    dictionary or object to extract fields from``."""
    st = _setup(app)
    body = json.dumps({"submission_id": 1, "subset_id": 1, "reference_auc": 0.8})
    r = st["dev"].post(
        "/v1/queries", content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )  # fmt: skip
    assert r.status_code == 422
    assert r.json()["detail"] == (
        "body: send JSON with 'Content-Type: application/json'; got Content-Type "
        "'application/x-www-form-urlencoded'"
    )


_README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
_REQUEST = re.compile(r"^(GET|POST) +(/v1/\S+)(?: +(\{.*?\}))?(?:\s|$)")


def _readme_requests() -> list[tuple[str, str, str, dict | None]]:
    """The README's service walkthrough: (who, method, path, body) in its order."""
    section = _README.split("## Sequestered test set (paper 2)", 1)[1].split("\n## ", 1)[0]
    who, out = "", []
    for line in section.splitlines():
        if line.startswith("# custodian"):
            who = "custodian"
        elif line.startswith("# developer"):
            who = "developer"
        m = _REQUEST.match(line)
        if m and who:
            body = None if m[3] is None else json.loads(m[3].replace("[...]", "[]"))
            out.append((who, m[1], m[2], body))
    return out


def test_readme_walkthrough_runs_as_written(app):
    """Before: the README's service section was one ``serve`` line; a custodian had to guess
    from /docs that a test set, a plan and a developer come in that order and which fields
    each takes, and a developer that subsets count from 1 and Thresholdout needs their own
    AUC. Each request of its walkthrough is run here as written (lists filled with data)."""
    steps = _readme_requests()
    assert len(steps) >= 10, steps
    said = {(m, p) for _, m, p, _ in steps}
    for needed in [("POST", "/v1/test-sets"), ("POST", "/v1/submissions"),
                   ("POST", "/v1/queries"), ("GET", "/v1/audit/queries.csv")]:  # fmt: skip
        assert needed in said, needed
    rng = np.random.default_rng(11)
    ids = [f"img-{i:04d}" for i in range(600)]
    y = (rng.random(600) < 0.25).astype(int)
    s = (rng.normal(size=600) + 1.2 * y).tolist()
    fill = {"image_ids": ids, "labels": y.tolist(), "scores": s}
    tokens = {"custodian": ADMIN, "developer": ""}
    for who, method, path, body in steps:
        if body is not None:
            body = {k: fill[k] if v == [] and k in fill else v for k, v in body.items()}
        client = _client(app, tokens[who])
        r = client.request(method, path, json=body)
        assert r.is_success, (who, method, path, r.status_code, r.text)
        if path.endswith("/developers"):
            tokens["developer"] = r.json()["token"]


def test_plan_sizes_say_what_was_given(app):
    """Before: both load_factor and subset_size, or neither, answered the same ``give exactly
    one of load_factor and subset_size`` (the CLI says which it got)."""
    st = _setup(app)
    url = f"/v1/test-sets/{st['tid']}/plans"
    r = st["adm"].post(url, json={"noise_rate": 0.8, "load_factor": 10, "subset_size": 100})
    assert r.status_code == 422
    assert r.json()["detail"] == "give exactly one of load_factor and subset_size; got both"
    r = st["adm"].post(url, json={"noise_rate": 0.8})
    assert r.json()["detail"] == "give exactly one of load_factor and subset_size; got none"


def test_audit_csv_of_an_unknown_developer_or_plan_is_404(app):
    """Before: ``GET /v1/audit/queries.csv?developer_id=99`` answered 200 with the header
    row alone, as for a developer who asked nothing (and ``/v1/developers/99/audit`` ``[]``):
    a typo looked like an empty audit."""
    st = _setup(app)
    for param, value in (("developer_id", 99), ("plan_id", 99)):
        r = st["adm"].get("/v1/audit/queries.csv", params={param: value})
        assert r.status_code == 404, (param, r.text)
        assert r.json()["detail"] == f"{param.split('_')[0]} 99 does not exist"
    r = st["adm"].get("/v1/audit/queries.csv", params={"developer_id": st["dev_id"]})
    assert r.status_code == 200 and r.text.startswith("query_id,")
    assert st["adm"].get("/v1/developers/99/audit").status_code == 404


def test_plan_cli_warns_of_a_plan_the_service_will_not_draw(capsys):
    """Before: ``fedroc sequester plan --images 1000 --subsets 1000000 --load-factor 1e9
    --noise-rate 1`` printed a plan without a word; the service refuses tables of more than
    50,000,000 entries (n_subsets * subset_size), as this one of 10^12."""
    from fedroc.sequester.service import MAX_TABLE_ENTRIES

    main(["sequester", "plan", "--images", "1000", "--subsets", "1000000", "--load-factor",
          "1e9", "--noise-rate", "1", "--json"])  # fmt: skip
    notes = json.loads(capsys.readouterr().out)["warnings"]
    assert any(f"more than {MAX_TABLE_ENTRIES:,}" in n and "refuse" in n for n in notes), notes
    main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor", "400",
          "--noise-rate", "0.8", "--json"])  # fmt: skip
    notes = json.loads(capsys.readouterr().out)["warnings"]
    assert not any("refuse" in n for n in notes), notes


def test_plan_cli_names_the_load_factor_that_cannot_be_drawn(capsys):
    """Before: ``... --load-factor 400 --max-copies 1`` said ``subsets of 4000 cannot be
    drawn`` (4000 what?) without naming --load-factor."""
    with pytest.raises(SystemExit) as exc:
        main(["sequester", "plan", "--images", "1000", "--subsets", "100", "--load-factor",
              "400", "--noise-rate", "1", "--max-copies", "1"])  # fmt: skip
    assert exc.value.code == 2
    assert (
        "--load-factor 400 (subsets of 4000 images) cannot be drawn with --max-copies 1 from "
        "--images 1000" in capsys.readouterr().err
    )


def _serve(monkeypatch, *args: str) -> None:
    import uvicorn

    def _served(*_a, **_k):
        raise AssertionError("uvicorn.run was reached")

    monkeypatch.setattr(uvicorn, "run", _served)
    monkeypatch.setenv("FEDROC_SEQUESTER_ADMIN_TOKEN", ADMIN)
    main(["sequester", "serve", "--host", "127.0.0.1", "--port", "1", *args])


def test_serve_on_a_directory_or_another_file_leaves_it_alone(monkeypatch, tmp_path, capsys):
    """Before: ``--db DIR`` made the directory mode 600 (``--db ~`` would have locked the
    home directory), then ended in ``internal error, please report it`` and a traceback
    (exit 1); ``--db notes.json`` made the file 600, then the same with ``file is not a
    database``."""
    folder = tmp_path / "folder"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    other = tmp_path / "notes.json"
    other.write_text('{"not": "a database"}')
    other.chmod(0o644)
    monkeypatch.setattr(
        "fedroc.cli.sequester_cmd._check_listen", lambda *_: None
    )  # port 1 needs root
    for path, what in ((folder, "is a directory"), (other, "is not a SQLite database")):
        with pytest.raises(SystemExit) as exc:
            _serve(monkeypatch, "--db", str(path))
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "internal error" not in err, err
        assert f"database path {str(path)!r} {what}" in err, err
    assert folder.stat().st_mode & 0o777 == 0o755
    assert other.stat().st_mode & 0o777 == 0o644


def test_serve_with_a_database_url_it_cannot_use(monkeypatch, capsys):
    """Before: ``--db mysql://x`` ended in ``ModuleNotFoundError: No module named 'MySQLdb'``
    and ``--db postgresql://...`` with no server there in ``OperationalError``, each as
    ``internal error, please report it`` with a traceback (exit 1)."""
    monkeypatch.setattr("fedroc.cli.sequester_cmd._check_listen", lambda *_: None)
    with pytest.raises(SystemExit) as exc:
        _serve(monkeypatch, "--db", "mysql://someone@localhost/x")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "--db: database URL scheme 'mysql' is not supported" in err, err
    # Nothing listens on port 1 of the loopback: the connection is refused at once.
    with pytest.raises(SystemExit) as exc:
        _serve(monkeypatch, "--db", "postgresql://fed:s3cretpw@127.0.0.1:1/seq")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "s3cretpw" not in err, err
    assert "--db postgresql://fed:***@127.0.0.1:1/seq cannot be opened:" in err, err


def test_an_h_thresholdout_plan_warns_its_creator(app):
    """Before: ``POST /v1/test-sets/1/plans`` with ``"mechanism": "h-thresholdout"``
    answered 201 with ``epsilon_guarantee`` null and, as its only warning, that with
    budget_units above eq. 3 "the mechanism's own guarantee still does" describe the plan:
    h-thresholdout has none (one-image probes read every label; README). Only ``serve``'s
    start-up warned, to the operator's terminal, after a restart."""
    st = _setup(app)
    body = {"n_subsets": 10, "subset_size": 100, "noise_rate": 0.05, "budget_units": 2,
            "prevalence": 0.3, "mechanism": "h-thresholdout"}  # fmt: skip
    r = st["adm"].post(f"/v1/test-sets/{st['tid']}/plans", json=body)
    assert r.status_code == 201
    plan = r.json()
    assert plan["epsilon_guarantee"] is None
    notes = plan["warnings"]
    assert any("h-thresholdout" in n and "labels" in n for n in notes), notes
    assert not any("own guarantee still does" in n for n in notes), notes
    # The default keeps its note: its own guarantee does describe it.
    body["mechanism"] = "thresholdout"
    notes = st["adm"].post(f"/v1/test-sets/{st['tid']}/plans", json=body).json()["warnings"]
    assert any("own guarantee still does" in n for n in notes), notes
    assert not any("h-thresholdout" in n for n in notes), notes


def test_a_short_custodian_token_names_where_it_came_from(monkeypatch, tmp_path, capsys):
    """Before: ``FEDROC_SEQUESTER_ADMIN_TOKEN=short fedroc sequester serve`` (or a token
    file holding ``short``) said ``the admin token must have at least 16 characters``:
    not which of the two sources, nor how long it was. The token is never echoed."""
    import uvicorn

    monkeypatch.setattr("fedroc.cli.sequester_cmd._check_listen", lambda *_: None)
    monkeypatch.setattr(uvicorn, "run", lambda *_a, **_k: pytest.fail("uvicorn.run reached"))
    monkeypatch.setenv("FEDROC_SEQUESTER_ADMIN_TOKEN", "sh0rtsecret")
    with pytest.raises(SystemExit) as exc:
        main(["sequester", "serve", "--db", str(tmp_path / "a.db"), "--port", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "sh0rtsecret" not in err
    assert "the custodian token in $FEDROC_SEQUESTER_ADMIN_TOKEN has 11 characters" in err, err
    assert "at least 16" in err
    token_file = tmp_path / "token"
    token_file.write_text("sh0rtsecret\n")
    token_file.chmod(0o600)
    with pytest.raises(SystemExit) as exc:
        main(["sequester", "serve", "--db", str(tmp_path / "a.db"), "--port", "1",
              "--admin-token-file", str(token_file)])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"the custodian token in --admin-token-file {str(token_file)!r} has 11" in err, err
    assert not (tmp_path / "a.db").exists()  # refused before the database is made


def test_every_endpoint_is_described_in_the_docs(app):
    """Before: /docs described 5 of the 24 operations; the developer's POST /v1/submissions
    and POST /v1/queries said nothing of what they need (every image once, reference_auc)
    or what an answer costs."""
    paths = _client(app, ADMIN).get("/openapi.json").json()["paths"]
    bare = [f"{m.upper()} {p}" for p, ops in paths.items() for m, op in ops.items()
            if not op.get("description", "").strip()]  # fmt: skip
    assert bare == []
    query = paths["/v1/queries"]["post"]["description"]
    assert "reference_auc" in query and "budget unit" in query
    assert "/v1/me/image-ids" in paths["/v1/submissions"]["post"]["description"]


def test_a_test_set_of_one_class_is_refused_at_upload(app):
    """Before: ``{"image_ids": ["a", "b", "c"], "labels": [1, 1, 1]}`` was stored (201), and
    every plan on it was refused (``the test set needs both classes``), each after counting
    its prevalence with noise, an epsilon audited for nothing."""
    adm = _client(app, ADMIN)
    for labels, word in (([1, 1, 1], "positive"), ([0, 0, 0], "negative")):
        r = adm.post("/v1/test-sets", json={"image_ids": ["a", "b", "c"], "labels": labels})
        assert r.status_code == 422, r.text
        assert r.json()["detail"] == (
            f"labels must hold both classes (an AUC needs them); all 3 images are {word}"
        )
    assert adm.get("/v1/test-sets").json() == []
    assert adm.post("/v1/test-sets", json={"image_ids": ["a", "b"], "labels": [0, 1]}).is_success


def test_plain_http_outside_loopback_is_warned(monkeypatch, tmp_path, capsys):
    """Before: ``serve --host 0.0.0.0`` without --tls-cert served plain HTTP to the network
    without a word, bearer tokens and scores in the clear (the docstring of
    fedroc.sequester.service says to use TLS outside loopback; the CLI did not). Nothing
    listens here: the port check and uvicorn are stubbed."""
    import uvicorn

    ran = []
    monkeypatch.setattr("fedroc.cli.sequester_cmd._check_listen", lambda *_: None)
    monkeypatch.setattr(uvicorn, "run", lambda *_a, **k: ran.append(k["host"]))
    monkeypatch.setenv("FEDROC_SEQUESTER_ADMIN_TOKEN", ADMIN)
    for host, warned in (("0.0.0.0", True), ("127.0.0.1", False), ("::1", False),
                         ("localhost", False)):  # fmt: skip
        main(["sequester", "serve", "--db", str(tmp_path / "w.db"), "--host", host])
        err = capsys.readouterr().err
        assert ("plain HTTP" in err) == warned, (host, err)
        if warned:
            assert f"--host {host}" in err and "--tls-cert" in err
    assert ran == ["0.0.0.0", "127.0.0.1", "::1", "localhost"]


def test_serve_on_a_path_whose_folder_does_not_exist_is_refused(monkeypatch, tmp_path, capsys):
    """Before: ``--db /srv/fedrco/seq.db`` (a typo in the folder) made the folders and a new,
    empty database there (exit 0): the custodian's test sets, plans and developer tokens
    seemed gone, and a second database grew beside the first. A fresh custodian names a new
    file in a folder that exists (the default is in the working directory); the folder is
    theirs to make. Now one line naming --db and the path, exit 2, and nothing is made."""
    monkeypatch.setattr("fedroc.cli.sequester_cmd._check_listen", lambda *_: None)
    typo = tmp_path / "fedrco" / "sub" / "seq.db"
    for db in (str(typo), f"sqlite:///{typo}"):
        with pytest.raises(SystemExit) as exc:
            _serve(monkeypatch, "--db", db)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert f"--db: database path {str(typo)!r}" in err, err
        assert f"folder {str(typo.parent)!r} does not exist" in err, err
        assert not (tmp_path / "fedrco").exists()
    # A new file in a folder that exists is a fresh custodian's database: made, mode 600.
    ran = []
    monkeypatch.setattr("uvicorn.run", lambda *_a, **_k: ran.append(1))
    monkeypatch.setenv("FEDROC_SEQUESTER_ADMIN_TOKEN", ADMIN)
    main(["sequester", "serve", "--db", str(tmp_path / "new.db"), "--port", "1"])
    assert ran == [1] and (tmp_path / "new.db").stat().st_mode & 0o777 == 0o600


def test_max_copies_without_replacement_is_told_in_the_apis_spelling(app):
    """Before: ``max_copies 3 needs replace=True: ...``, Python's spelling, to a custodian who
    sent JSON (``"replace": false``); and the refusal came from the draw, after the set's
    prevalence had been counted with noise (a ``count-prevalence`` action in the audit for a
    plan that was refused). Now the JSON field's spelling, and nothing counted."""
    adm = _client(app, ADMIN)
    ids = [f"img-{i:04d}" for i in range(N)]
    r = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": [0, 1] * (N // 2)})
    tid = r.json()["test_set_id"]
    body = {"n_subsets": 10, "subset_size": 100, "noise_rate": 0.05, "budget_units": 2,
            "replace": False, "max_copies": 3}  # fmt: skip
    r = adm.post(f"/v1/test-sets/{tid}/plans", json=body)
    assert r.status_code == 422
    msg = r.json()["detail"]
    assert "replace=True" not in msg, msg
    assert msg.startswith('max_copies 3 needs "replace": true (got false)'), msg
    assert [a["action"] for a in adm.get("/v1/audit/actions").json()] == ["create-test-set"]


def test_budget_shows_the_developers_quotas_and_limits(app):
    """Before: ``GET /v1/budget`` answered budget_total, budget_remaining and n_queries only:
    not the submissions made, nor the limits (max_queries, max_submissions) the custodian
    set, which a developer planning their queries needs (GET /v1/me had them, beside the
    plan). Now the same ``quota`` as /v1/me, the developer's own and nobody else's."""
    st = _setup(app, mechanism="laplace", max_queries=7, max_submissions=3)
    other = st["adm"].post(f"/v1/plans/{st['pid']}/developers", json={"name": "bob"}).json()
    st["adm"].post(f"/v1/developers/{other['developer_id']}/top-up", json={"queries": 5})
    sid = (
        st["dev"]
        .post("/v1/submissions", json={"image_ids": st["ids"], "scores": st["s"].tolist()})
        .json()["submission_id"]
    )
    assert st["dev"].post("/v1/queries", json={"submission_id": sid, "subset_id": 1}).is_success
    got = st["dev"].get("/v1/budget").json()
    assert got == {"budget_total": 2, "budget_remaining": 1, "n_queries": 1,
                   "quota": {"n_queries": 1, "max_queries": 7, "n_submissions": 1,
                             "max_submissions": 3}}  # fmt: skip
    me = st["dev"].get("/v1/me").json()
    assert {k: me[k] for k in got} == got
    # bob's top-up is his: his own budget shows it, alice's does not.
    bob = _client(app, other["token"]).get("/v1/budget").json()
    assert bob["quota"] == {"n_queries": 0, "max_queries": 12, "n_submissions": 0,
                            "max_submissions": 3}  # fmt: skip


def test_a_developer_name_taken_on_the_plan_is_refused(app):
    """Before: ``POST /v1/plans/1/developers {"name": "alice"}`` twice (a retried request, a
    slip) made two developers named alice, each with the plan's whole budget and a token of
    their own; the list and the audit could no longer tell them apart. Now the second is 409
    naming the name, the plan and the developer who has it, and what to do instead; nothing
    is made or recorded. A name is the plan's: another plan may have its own alice."""
    st = _setup(app)
    url = f"/v1/plans/{st['pid']}/developers"
    for name in ("alice", "alice"):  # a revoked developer keeps their name too
        r = st["adm"].post(url, json={"name": name})
        assert r.status_code == 409, r.text
        assert r.json()["detail"] == (
            f"developer name 'alice' is taken on plan {st['pid']} (developer {st['dev_id']}); "
            f"give another name, or top up (POST /v1/developers/{st['dev_id']}/top-up) or "
            f"rotate (POST /v1/developers/{st['dev_id']}/rotate) the developer who has it"
        )
        st["adm"].post(f"/v1/developers/{st['dev_id']}/revoke")
    assert [d["name"] for d in st["adm"].get("/v1/developers").json()] == ["alice"]
    actions = [a["action"] for a in st["adm"].get("/v1/audit/actions").json()]
    assert actions.count("create-developer") == 1
    assert st["adm"].post(url, json={"name": "Alice"}).status_code == 201  # another name
    body = {"n_subsets": 10, "subset_size": 100, "noise_rate": 0.05, "budget_units": 2,
            "prevalence": 0.3}  # fmt: skip
    pid2 = st["adm"].post(f"/v1/test-sets/{st['tid']}/plans", json=body).json()["plan_id"]
    assert st["adm"].post(f"/v1/plans/{pid2}/developers", json={"name": "alice"}).is_success


def test_one_name_asked_for_at_once_by_eight_workers_makes_one_developer(app, tmp_path):
    """Eight workers (a Store each, one database) creating one name at the same moment: one
    developer, seven clear refusals. Without the write on the plan's row first, read then
    insert, the others ended in SQLite's 'database is locked' (a 500), not in the 409."""
    import threading

    from fedroc.sequester.db import Conflict, Store

    st = _setup(app)
    stores = [Store(str(tmp_path / "seq.db")) for _ in range(8)]
    made, refused, other = [], [], []
    start = threading.Barrier(len(stores))

    def create(store: Store) -> None:
        start.wait()
        try:
            made.append(store.add_developer(st["pid"], "bob", threshold_noise=0.0))
        except Conflict:
            refused.append(store)
        except Exception as exc:  # counted: the test fails on it
            other.append(exc)

    threads = [threading.Thread(target=create, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(made), len(refused), other) == (1, 7, [])
    names = [d["name"] for d in stores[0].developers()]
    assert names == ["alice", "bob"]
    for s in stores:
        s.close()


def test_a_developer_name_with_an_outer_space_is_refused(app):
    """Before: ``{"name": "alice "}`` beside an ``alice`` made a second developer with the
    plan's whole budget, shown alike in the list and the audit (the diff review's find). Now
    422, naming the field; nothing is made."""
    st = _setup(app)
    url = f"/v1/plans/{st['pid']}/developers"
    for name in ("alice ", " alice", "\talice", "   "):
        r = st["adm"].post(url, json={"name": name})
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith("name:"), r.text
        assert "may not begin or end with a space" in r.json()["detail"], r.text
    assert [d["name"] for d in st["adm"].get("/v1/developers").json()] == ["alice"]
    assert st["adm"].post(url, json={"name": "alice bob"}).status_code == 201  # inner space


@pytest.mark.parametrize(
    ("args", "told"),
    [
        (["--rate-burst", "0"], "--rate-burst must be a whole number >= 1; got 0"),
        (["--rate-burst", "-1"], "--rate-burst must be a whole number >= 1; got -1"),
        (["--rate-limit", "-1"], "--rate-limit must be a number >= 0 (0: none); got -1.0"),
        (["--rate-limit", "nan"], "--rate-limit must be a number >= 0 (0: none); got nan"),
        (
            ["--sqlite-synchronous", "OFF"],
            "--sqlite-synchronous must be one of FULL, NORMAL, EXTRA; got 'OFF'",
        ),
    ],
)
def test_serve_names_the_option_it_refuses(monkeypatch, tmp_path, capsys, args, told):
    """Before: ``--rate-burst 0`` and ``--rate-burst -1`` served with a burst of 1, without
    a word; ``--rate-limit -1`` answered ``rate_limit must be a number >= 0`` and
    ``--sqlite-synchronous OFF`` ``sqlite synchronous must be ...``: create_app's parameter
    names, not the options the operator typed. And the database file was made first."""
    db = tmp_path / "s.db"
    with pytest.raises(SystemExit) as exc:
        _serve(monkeypatch, "--db", str(db), *args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {told}" in err, err
    assert "Traceback" not in err
    assert not db.exists()


def test_create_app_refuses_a_burst_below_one(tmp_path):
    with pytest.raises(InputError, match=r"rate_burst must be a whole number >= 1; got 0"):
        create_app(str(tmp_path / "s.db"), ADMIN, rate_burst=0)


def test_docs_describe_every_field(app):
    """Before: the README says ``/docs describes every field``, but 13 had no description:
    the submission's image_ids and scores, the top-up's three fields, the developer's name,
    the test set's name and every field of a query's answer (QueryOut)."""
    schemas = TestClient(app).get("/openapi.json").json()["components"]["schemas"]
    bare = [
        f"{name}.{field}"
        for name, schema in schemas.items()
        if name not in ("HTTPValidationError", "ValidationError")
        for field, spec in schema.get("properties", {}).items()
        if not spec.get("description")
    ]
    assert bare == [], bare


def test_a_plans_notes_go_to_its_creator_not_to_the_servers_log(app, recwarn):
    """Before: every plan request printed its notes on the operator's terminal too
    (``warning: PlanWarning: ... the service (fedroc sequester serve) will refuse to draw
    them`` from the service itself), refused requests included; they are the custodian's,
    answered in the plan's ``warnings``."""
    adm = _client(app, ADMIN)
    ids = [f"img-{i:04d}" for i in range(N)]
    tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": [0, 1, 1] * (N // 3)})
    body = {"n_subsets": 10, "subset_size": 100, "noise_rate": 0.8, "budget_units": 2,
            "prevalence": 0.3}  # fmt: skip
    r = adm.post(f"/v1/test-sets/{tid.json()['test_set_id']}/plans", json=body)
    assert r.status_code == 201, r.text
    notes = r.json()["warnings"]
    assert any("budget_units 2 is above" in n for n in notes), notes
    assert any("Laplace noise of scale 0.8" in n for n in notes), notes
    from fedroc.methods.sequester.planner import PlanWarning

    assert [w for w in recwarn if issubclass(w.category, PlanWarning)] == []


def test_the_schema_describes_the_error_bodies_the_service_sends(app):
    """Before: the OpenAPI schema gave every 422 FastAPI's ``HTTPValidationError`` (detail: a
    list of objects), but the service answers ``{"detail": "<one line>"}``: schemathesis
    (``response_schema_conformance``) flagged POST /v1/queries and /v1/submissions, and a
    client generated from /openapi.json could not read a refusal. 401, 403, 404, 413 and
    429 (and 409 for a developer's name) were not described at all."""
    client = TestClient(app)
    spec = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in json.dumps(spec)
    ref = {"$ref": "#/components/schemas/ErrorOut"}
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if path.endswith("/health") or path.startswith("/static"):
                continue
            for code in ("401", "422", "429"):
                body = op["responses"][code]["content"]["application/json"]["schema"]
                assert body == ref, (method, path, code)
    dev = spec["paths"]["/v1/plans/{plan_id}/developers"]["post"]["responses"]
    assert dev["409"]["content"]["application/json"]["schema"] == ref
    assert spec["components"]["schemas"]["ErrorOut"]["required"] == ["detail"]
    # What is sent has that shape: a validation error and a handler's refusal alike.
    adm = _client(app, ADMIN)
    for r in (
        adm.post("/v1/test-sets", json={"image_ids": "x"}),
        adm.post("/v1/test-sets", json={"image_ids": ["a"], "labels": [1]}),
        client.get("/v1/me"),
    ):
        assert r.status_code in (401, 422) and list(r.json()) == ["detail"], r.text
        assert isinstance(r.json()["detail"], str)


def test_a_body_that_is_not_json_is_told_so(app):
    """Before: a body cut short answered 422 ``20: JSON decode error`` (the character's
    position shown as a field), and one that is not UTF-8 400 ``There was an error parsing
    the body``, a status the schema does not list (schemathesis, ``status_code_conformance``)
    and naming nothing."""
    adm = _client(app, ADMIN)
    r = _post_raw(adm, "/v1/test-sets", '{"image_ids": ["a", "b"],')
    assert r.status_code == 422
    assert r.json()["detail"] == (
        "body: not valid JSON at offset 25: Expecting property name enclosed in double quotes"
    )
    r = adm.post(
        "/v1/test-sets", content=b'{"name": "\xffx"}', headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 422
    assert r.json()["detail"] == "body: not valid JSON: byte 10 is not UTF-8 text (b'\\xff')"
    # Other HTTP errors keep their status (and their own detail:
    # test_unknown_endpoint_and_method_are_named).
    r = adm.get("/v1/no-such-route")
    assert r.status_code == 404 and "GET /v1/no-such-route" in r.json()["detail"]


def test_a_body_in_utf16_or_utf32_is_refused_naming_its_encoding(app):
    """Before: a body in UTF-16 or UTF-32 was answered 201 as if it were UTF-8 (Python's
    json.loads guesses the encoding from the zero bytes or a byte order mark), though JSON
    on the wire is UTF-8 (RFC 8259) and bytes that are not UTF-8 are refused. Now 422 names
    the body and the encoding, and nothing is created; a UTF-8 byte order mark stays
    allowed (RFC 8259 lets a reader ignore it)."""
    adm = _client(app, ADMIN)
    text = json.dumps({"image_ids": ["a", "b", "c"], "labels": [0, 1, 0]})
    kind = {"Content-Type": "application/json"}
    for encoding in ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"):
        r = adm.post("/v1/test-sets", content=text.encode(encoding), headers=kind)
        assert r.status_code == 422, (encoding, r.text)
        assert r.json()["detail"] == (
            f"body: JSON must be UTF-8 text; these bytes read as {encoding.upper()} "
            "(send the body encoded as UTF-8)"
        )
    assert adm.get("/v1/test-sets").json() == []
    for encoding in ("utf-8", "utf-8-sig"):
        r = adm.post("/v1/test-sets", content=text.encode(encoding), headers=kind)
        assert r.status_code == 201, (encoding, r.text)
    # A developer's body alike (every route reads its body the same way).
    env = _setup(app)
    r = env["dev"].post("/v1/submissions", content=json.dumps({"x": 1}).encode("utf-16"),
                        headers=kind)  # fmt: skip
    assert r.status_code == 422 and "UTF-16" in r.json()["detail"], r.text


def test_the_schema_states_the_rules_the_handlers_check(app):
    """Before: /openapi.json gave image_ids and labels as any arrays, and scores as numbers or
    null, though the handlers refuse fewer than two images, a repeated id, a label other than
    0/1 and a null score (422 naming the image): a client generated from the schema could not
    know. Now the schema states them, and each stated rule is one the service refuses."""
    spec = _client(app, ADMIN).get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    test_set = schemas["TestSetIn"]["properties"]
    assert test_set["image_ids"]["minItems"] == 2 and test_set["image_ids"]["uniqueItems"]
    assert test_set["labels"]["items"] == {"type": "integer", "enum": [0, 1]}
    assert test_set["labels"]["minItems"] == 2
    submission = schemas["SubmissionIn"]["properties"]
    assert submission["image_ids"]["uniqueItems"]
    assert submission["scores"]["items"] == {"type": "number"}
    assert "UTF-8" in spec["info"]["description"]
    adm = _client(app, ADMIN)
    for body in (
        {"image_ids": ["a"], "labels": [1]},  # minItems
        {"image_ids": ["a", "a"], "labels": [0, 1]},  # uniqueItems
        {"image_ids": ["a", "b"], "labels": [0, 2]},  # enum
    ):
        r = adm.post("/v1/test-sets", json=body)
        assert r.status_code == 422, (body, r.text)
    env = _setup(app)
    ids, scores = env["ids"], env["s"].tolist()
    for wrong in (
        {"image_ids": [ids[0], *ids[:-1]], "scores": scores},  # uniqueItems
        {"image_ids": ids, "scores": [None, *scores[1:]]},  # items: numbers
    ):
        r = env["dev"].post("/v1/submissions", json=wrong)
        assert r.status_code == 422, r.text


def test_the_schema_says_the_audit_exports_are_csv(app):
    """Before: /openapi.json gave GET /v1/audit/queries.csv and /v1/audit/actions.csv an
    application/json answer; they send text/csv (schemathesis, ST105)."""
    client = _client(app, ADMIN)
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/audit/queries.csv", "/v1/audit/actions.csv"):
        assert list(paths[path]["get"]["responses"]["200"]["content"]) == ["text/csv"], path
        r = client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")


def test_created_at_is_documented_as_unix_time(app):
    """Before: `created_at` in the JSON answers and CSV exports was an undocumented float
    (seconds since the epoch). Every GET that answers it says so in /docs (the value stays
    a number: existing clients read it)."""
    st = _setup(app)
    dev, adm = st["dev"], st["adm"]
    r = dev.post("/v1/submissions", json={"image_ids": st["ids"], "scores": st["s"].tolist()})
    sid = r.json()["submission_id"]
    dev.post("/v1/queries", json={"submission_id": sid, "subset_id": 1, "reference_auc": 0.8})
    spec = adm.get("/openapi.json").json()
    assert "Unix time: seconds since 1970-01-01 UTC" in spec["info"]["description"]
    answered = []
    for path, ops in spec["paths"].items():
        if "get" not in ops or "{" in path:
            continue
        for client in (adm, dev):
            r = client.get(path)
            if r.status_code == 200 and "created_at" in r.text:
                answered.append(path)
                text = " ".join(ops["get"].get("description", "").split())
                assert "created_at" in text and "Unix time" in text, (path, text)
                break
    assert {"/v1/test-sets", "/v1/developers", "/v1/queries", "/v1/audit/queries.csv"} <= set(
        answered
    ), answered
    assert isinstance(adm.get("/v1/test-sets").json()[0]["created_at"], float)
    audit = spec["paths"]["/v1/developers/{developer_id}/audit"]["get"]["description"]
    assert "Unix time" in audit


def test_unknown_endpoint_and_method_are_named(app):
    """Before: ``GET /v1/query`` (for /v1/queries) answered 404 ``Not Found`` and ``DELETE
    /v1/queries`` 405 ``Method Not Allowed``, naming neither the path nor what it takes."""
    st = _setup(app)
    r = st["dev"].get("/v1/query")
    assert r.status_code == 404
    assert r.json()["detail"] == "no endpoint GET /v1/query; the endpoints are listed at /docs"
    r = st["dev"].delete("/v1/queries")
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST"
    assert r.json()["detail"] == "no endpoint DELETE /v1/queries; /v1/queries takes GET, POST"
    # A missing object is still named by the handler, not by this.
    assert st["adm"].post("/v1/developers/99/revoke").json()["detail"] == (
        "developer 99 does not exist"
    )


def test_tls_files_that_are_not_a_certificate_and_key_are_refused(monkeypatch, tmp_path, capsys):
    """Before: ``serve --tls-cert server.log --tls-key server.log`` (or a key of another
    certificate) printed ``serving ... on https://...``, then ``error: [SSL] PEM lib
    (_ssl.c:3905)``, naming neither option nor file. Now one line naming both, exit 2,
    before the database is opened; a matching pair reaches uvicorn."""
    import uvicorn

    from fedroc import _tls

    ca, ca_key = _tls.new_ca("fedroc test CA", days=1)
    cert, key = _tls.issue_certificate(ca, ca_key, "sequester", hosts=["127.0.0.1"], days=1)
    _tls.write_certificate(tmp_path / "cert.pem", cert)
    _tls.write_private_key(tmp_path / "key.pem", key)
    _tls.write_private_key(tmp_path / "ca-key.pem", ca_key)
    (tmp_path / "log.txt").write_text("serving\n")
    ran = []
    monkeypatch.setattr("fedroc.cli.sequester_cmd._check_listen", lambda *_: None)
    monkeypatch.setattr(uvicorn, "run", lambda *_a, **k: ran.append(k["ssl_certfile"]))
    monkeypatch.setenv("FEDROC_SEQUESTER_ADMIN_TOKEN", ADMIN)
    db = tmp_path / "t.db"
    for c, k in (("log.txt", "log.txt"), ("cert.pem", "ca-key.pem"), ("cert.pem", "log.txt")):
        with pytest.raises(SystemExit) as exc:
            main(["sequester", "serve", "--db", str(db), "--tls-cert", str(tmp_path / c),
                  "--tls-key", str(tmp_path / k)])  # fmt: skip
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "serving" not in err, err
        assert f"--tls-cert '{tmp_path / c}' and --tls-key '{tmp_path / k}' are not" in err, err
    assert not db.exists() and ran == []
    main(["sequester", "serve", "--db", str(db), "--tls-cert", str(tmp_path / "cert.pem"),
          "--tls-key", str(tmp_path / "key.pem")])  # fmt: skip
    assert ran == [str(tmp_path / "cert.pem")]
