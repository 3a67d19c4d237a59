"""What a site's operator and an analyst mistype, walking through docs/flower.md.

Each was found by doing the documented steps on loopback (2026-12-07): a bad address or
port reached Flower, which failed after its start-up in words of its own, without naming the
option (`flower run --superlink 127.0.0.1:99999`: 7 s, "Connection to the SuperLink is
unavailable"; `flower supernode`: 18 s, exit status 1, "Exit Code: 600"; `--port 70000`:
Flower's whole usage; a taken node port: a traceback, restarted forever). Now each is
refused before anything starts: one line naming the option and the value, exit status 2.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli import run_main

pytest.importorskip("flwr")

from fedroc.exceptions import InputError
from fedroc.federation.flower.site_config import SiteNodeConfig


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port some other process listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a command got as far as starting or submitting anything."""
    import fedroc.federation.flower.deploy as deploy
    import fedroc.federation.flower.node as node
    import fedroc.federation.flower.superlink as superlink

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command went on to start Flower")

    monkeypatch.setattr(node, "supervise", started)
    monkeypatch.setattr(deploy, "submit_job", started)
    monkeypatch.setattr(deploy.LocalDeployment, "__enter__", started)
    monkeypatch.setattr(deploy.LocalDeployment, "start", started, raising=False)
    monkeypatch.setattr(superlink, "main", started)


def _refused(capsys: pytest.CaptureFixture[str], args: list[str], *words: str) -> str:
    code, out, err = run_main(capsys, args)
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def _site(tmp_path: Path) -> list[str]:
    data = tmp_path / "north.csv"
    data.write_text("label,score\n" + "".join(f"{i % 2},{i / 20}\n" for i in range(20)))
    return ["--site", "north", "--data", str(data), "--node-dir", str(tmp_path / "node")]


BAD_ADDRESSES = [
    ("127.0.0.1:99999", "99999"),
    ("127.0.0.1:0", "'0'"),
    ("127.0.0.1:abc", "'abc'"),
    ("localhost", "HOST:PORT"),
    ("https://127.0.0.1:9093", "URL prefix"),
    ("::1:9093", "[::1]:9093"),
]


@pytest.mark.parametrize(("address", "why"), BAD_ADDRESSES)
def test_a_bad_superlink_address_is_refused_by_every_command_naming_it(
    capsys, tmp_path, nothing_starts, address, why
) -> None:
    ca = ["--root-certificates", str(tmp_path / "ca.crt")]  # never read: the address is first
    key = tmp_path / "north.pub"
    commands = [
        ["flower", "run", "--superlink", address, "--insecure", "--method", "rocglm"],
        ["flower", "supernode", "--superlink", address, "--insecure", *_site(tmp_path)],
        ["flower", "register", "--superlink", address, *ca, "--site-key", f"north={key}"],
        ["flower", "health", "--superlink", address, "--insecure"],
    ]
    for args in commands:
        line = _refused(capsys, args, "--superlink", repr(address), why)
        assert line.startswith("error: --superlink"), line
    assert not (tmp_path / "node").exists()  # the node made no keys for a wrong address


def test_good_addresses_pass_the_check() -> None:
    from fedroc.federation.flower.deploy import FlowerConnection, check_address

    for address in ("127.0.0.1:9093", "link.example.org:1", "[::1]:65535", "localhost:8000"):
        assert check_address(address, "--superlink") == address
    with pytest.raises(InputError, match=r"address '127\.0\.0\.1:99999'"):
        FlowerConnection("127.0.0.1:99999", insecure=True)


def test_the_nodes_port_out_of_range_or_taken_is_refused_before_it_starts(
    capsys, tmp_path, nothing_starts, taken_port
) -> None:
    base = ["flower", "supernode", "--superlink", "127.0.0.1:9093", "--insecure"]
    _refused(capsys, [*base, *_site(tmp_path), "--port", "70000"], "--port", "70000")
    taken = [*base, *_site(tmp_path), "--port", str(taken_port)]
    _refused(capsys, taken, f"--port {taken_port}", "not free")
    assert not (tmp_path / "node" / "node-auth.key").exists()  # refused before its keys


def test_the_superlinks_port_out_of_range_or_taken_is_refused_before_it_starts(
    capsys, tmp_path, nothing_starts, taken_port
) -> None:
    up = ["flower", "up", "--sites", "3", "--dir", str(tmp_path / "up")]
    _refused(capsys, [*up, "--port", "70000"], "--port", "70000")
    _refused(capsys, [*up, "--port", str(taken_port)], f"--port {taken_port}", "not free")
    assert not (tmp_path / "up").exists()  # refused before the synthetic data was written
    link = ["flower", "superlink", "--insecure", "--host", "127.0.0.1"]
    _refused(capsys, [*link, "--port", "70000"], "--port", "70000")
    _refused(capsys, [*link, f"--port={taken_port}"], f"--port {taken_port}", "not free")
    # Digits that are not ASCII (Arabic-Indic 9093) are not a port, as check_address holds
    # for --superlink (review 15): str.isdecimal() let them through to int().
    _refused(capsys, [*link, "--port", "\u0669\u0660\u0669\u0663"], "--port", "got '")


def test_the_superlinks_misspelt_flag_is_refused_in_one_line(
    capsys, nothing_starts, monkeypatch
) -> None:
    """`fedroc flower superlink` passes flower-superlink's flags through (docs/flower.md); a
    misspelt one (`--prot 9093`) went on to Flower's parser, which printed its usage, 19
    lines, and "flower-superlink: error: unrecognized arguments" (exit 2) after the warm
    executor had started; an abbreviation (`--po 9093`) Flower took as --port while the
    launcher's port check and its executor's address did not see it."""
    import fedroc.federation.flower.superlink as superlink

    link = ["flower", "superlink", "--insecure"]
    _refused(capsys, [*link, "--prot", "9093"], "unknown option --prot", "did you mean --port?")
    _refused(capsys, [*link, "--po", "9093"], "unknown option --po ", "did you mean --port?")
    _refused(capsys, [*link, "--data=x.db"], "unknown option --data ", "--database?")
    _refused(capsys, [*link, "--isolation", "thread"], "--isolation: invalid choice: 'thread'")
    _refused(capsys, [*link, "9093"], "takes no argument '9093'")
    _refused(capsys, [*link, "--link-state"], "--link-state needs a value")
    # Flower's flags and the launcher's own go on to it, as the systemd unit gives them.
    seen: list[list[str]] = []
    monkeypatch.setattr(superlink, "main", seen.append)
    good = ["--host", "0.0.0.0", "--ssl-ca-certfile", "ca.crt", "--ssl-certfile", "s.pem"]
    good += ["--ssl-keyfile", "s.key", "--enable-supernode-auth", "--database", "state.db"]
    good += ["--link-state", "sql", "--serverapp-executor=stock", "--isolation=process"]
    code, _, err = run_main(capsys, ["flower", "superlink", *good])
    assert code == 0 and seen == [good], err


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('data = "{tmp}/nowhere.csv"', ["nowhere.csv", "does not exist"]),
        ('data = "{tmp}/north.csv"\nmin_count = 10', ["min_count", "unknown node config key"]),
        (
            'data = "{tmp}/north.csv"\npolicy-file = "{tmp}/policy.toml"',
            ["policy-file", "policy.toml"],
        ),
        ("data = {tmp}/north.csv", ["not readable TOML"]),
    ],
)
def test_the_stock_nodes_executor_refuses_a_node_config_it_cannot_serve(
    capsys, tmp_path, monkeypatch, body, words
) -> None:
    """It waited without a word; the analyst's first job then learnt only that the site is
    "misconfigured on its SuperNode (details in its log)"."""
    import fedroc.federation.flower.executor as executor

    monkeypatch.chdir(tmp_path)  # a node directory defaults to ./fedroc-node-SITE
    monkeypatch.setattr(executor, "serve", lambda *a, **k: pytest.fail("it started serving"))
    _site(tmp_path)  # writes north.csv
    config = tmp_path / "north.toml"
    config.write_text('site = "north"\n' + body.format(tmp=tmp_path) + "\n")
    args = ["flower", "executor", "--insecure", "--node-config", str(config)]
    _refused(capsys, args, "--node-config", str(config), *words)
    # The same file with its fault mended is taken.
    served: list[object] = []
    monkeypatch.setattr(executor, "serve", lambda *a, **k: served.append(k["node_config"]))
    config.write_text(f'site = "north"\ndata = "{tmp_path}/north.csv"\n')
    code, _, err = run_main(capsys, args)
    assert code == 0 and served == [config], err


def _sent_options(monkeypatch, capsys, args: list[str]) -> dict[str, object]:
    """The job `flower run ARGS` would submit (nothing is run)."""
    from fedroc.federation.flower import deploy

    sent: list[dict[str, object]] = []

    def submit(connection: object, job: str, options: dict[str, object], **_: object) -> None:
        sent.append(options)
        raise SystemExit(0)

    monkeypatch.setattr(deploy, "submit_job", submit)
    base = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure"]
    code, _, err = run_main(capsys, [*base, *args])
    assert code == 0 and len(sent) == 1, err
    return sent[0]


def test_an_mpc_job_on_flower_can_ask_the_minimum_class_count_the_sites_require(
    monkeypatch, capsys, tmp_path
) -> None:
    """Sites started with --min-count 10 refused every `flower run --method mpc` ("the job's
    minimum class count 5 is below the site's minimum of 10"), and no option of `flower
    run` could raise it; `fedroc evaluate --mpc-min-class-count` could."""
    from _flower_sites import write_sites

    import fedroc.apps.application  # noqa: F401  (registers the evaluate job)
    from fedroc.exceptions import DisclosureError
    from fedroc.federation import Federation
    from fedroc.federation.flower.jobs import run_job
    from fedroc.privacy import DisclosurePolicy

    options = _sent_options(monkeypatch, capsys, ["--method", "mpc", "--mpc-min-class-count", "10"])
    assert options["options"] == {"mpc_min_class_count": 10}
    run = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure"]
    _refused(capsys, [*run, "--method", "mpc", "--mpc-min-class-count", "0"], "0")
    _refused(
        capsys, [*run, "--method", "rocglm", "--mpc-min-class-count", "10"], "--mpc-min-class-count"
    )

    paths = write_sites(tmp_path)

    def federation() -> Federation:
        return Federation.from_files(paths, policy=DisclosurePolicy(min_count=10))

    with pytest.raises(DisclosureError, match="minimum class count 5 is below"):
        run_job("evaluate", federation(), {"method": "mpc"})
    result = run_job("evaluate", federation(), options)
    assert result["method"] == "mpc" and 0.5 < result["auc"] < 1


def _documented_runs() -> list[list[str]]:
    """The `fedroc flower run` lines docs/flower.md gives after `flower up`, in its order
    (an optional ``[--flag value]`` taken as given)."""
    text = (Path(__file__).parents[1] / "docs" / "flower.md").read_text()
    block = text.split("is found by it. Then:\n\n```\n", 1)[1].split("```", 1)[0]
    runs = []
    for line in block.splitlines():
        words = line.replace("[", "").replace("]", "").split()
        assert words[:3] == ["fedroc", "flower", "run"], line
        runs.append(words[3:])
    return runs


def test_the_documented_runs_after_flower_up_all_succeed_in_their_order(
    monkeypatch, capsys
) -> None:
    """docs/flower.md's three commands on `flower up --sites 3`: the histogram's
    `--score-range=-3,3` was refused (the ROC-GLM's calibration had bound the sites'
    histograms to [0, 1]) and `moments --bins 10` was refused (the sites had released
    calibration through secure aggregation, so never again in the clear). Run here by the
    ServerApp's jobs on the same synthetic sites, in process (the same site functions)."""
    import fedroc.apps.application  # noqa: F401  (registers the evaluate job)
    from fedroc.datasets import make_multisite
    from fedroc.federation import Federation
    from fedroc.federation.flower.jobs import run_job

    sizes = [300 + 70 * (k % 4) for k in range(3)]  # `flower up --sites 3`, seed 2024
    federation = Federation.from_frames(make_multisite(sizes, seed=2024))
    runs = _documented_runs()
    assert len(runs) >= 3
    for args in runs:
        args = [a for a in args if a not in ("--deployment", "DIR", "--json")]
        job = args[args.index("--job") + 1] if "--job" in args else "evaluate"
        options = _sent_options(monkeypatch, capsys, args)
        result = run_job(job, federation, options)  # a refusal raises
        assert "mean" in result or 0.5 < result["auc"] < 1, (args, result)


def test_flower_up_says_each_step_of_its_start(monkeypatch, capsys, tmp_path) -> None:
    """`flower up` printed "starting a SuperLink and 3 SuperNode(s) ..." and then nothing for
    the 30-45 s its start took on a loaded machine. Its steps are now said as they are done
    (here without processes: the SuperLink's port, the registration and the nodes' contact
    are taken as done)."""
    from tests._flower_stub import stub_flower_deployment

    spawned = stub_flower_deployment(monkeypatch)
    args = ["flower", "up", "--sites", "3", "--dir", str(tmp_path), "--duration", "0"]
    code, _, err = run_main(capsys, args)
    assert code == 0, err
    assert len(spawned) == 4  # the SuperLink and three nodes, none really started
    steps = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    address = json.loads((tmp_path / "connection.json").read_text())["address"]
    assert [s.split(" (")[0] for s in steps] == [
        f"the SuperLink listens on {address}",
        "the sites' keys are registered: site1, site2, site3",
        "site 'site1': its SuperNode is connected",
        "site 'site2': its SuperNode is connected",
        "site 'site3': its SuperNode is connected",
    ], err
    assert all(s.endswith(" s)") for s in steps), steps


def test_supernode_tells_its_operator_the_register_command_of_the_docs(
    monkeypatch, capsys, tmp_path
) -> None:
    """The first start printed only Flower's `flwr supernode register PUB --name north`,
    which needs a flwr configuration of the SuperLink; docs/flower.md (step 4) registers with
    `fedroc flower register`. And `--epsilon-limit` said "(needs --audit)", though the node
    always keeps an audit log and ledger (NODE_DIR/audit.jsonl by default)."""
    import tomllib

    import fedroc.federation.flower.node as node

    monkeypatch.setattr(node, "supervise", lambda args, **_: 0)
    with socket.socket() as free:  # the node's own port: one that nothing holds
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    args = ["flower", "supernode", "--superlink", "127.0.0.1:9093", "--port", port]
    site = _site(tmp_path)
    code, _, err = run_main(capsys, [*args, "--insecure", *site, "--epsilon-limit", "3"])
    assert code == 0, err
    public = tmp_path / "node" / "node-auth.pub"
    # --insecure turns node authentication off: no key. With TLS the key and the line:
    assert not public.exists()
    monkeypatch.setattr("fedroc.cli.flower_cmd._check_certificates", lambda path: None)
    tls = ["--root-certificates", str(tmp_path / "ca.crt")]
    code, _, err = run_main(capsys, [*args, *tls, *site, "--epsilon-limit", "3"])
    assert code == 0, err
    line = " ".join(err.split())
    assert "fedroc flower register --superlink 127.0.0.1:9093" in line, line
    assert f"--site-key north={public}" in line, line
    config = tomllib.loads((tmp_path / "node" / "node-config.toml").read_text())
    assert config["epsilon-limit"] == 3 and config["audit"].endswith("audit.jsonl")
    _, out, _ = run_main(capsys, ["flower", "supernode", "--help"])
    assert "needs --audit" not in " ".join(out.split())


def test_a_superlink_flower_calls_unavailable_is_told_apart_from_a_wrong_ca(tmp_path) -> None:
    """`flower run` and `flower register` with the CA of another deployment said only
    Flower's "Connection to the SuperLink is unavailable. Please check your network
    connection", as for a SuperLink that is down. A direct check of its /health now says
    which: the certificate failed verification, or nothing listens there."""
    import http.server
    import ssl
    import threading

    from fedroc.federation.flower.deploy import (
        FlowerConnection,
        generate_certificates,
        unavailable_why,
    )

    ours = generate_certificates(tmp_path / "ours", ["127.0.0.1"])
    other = generate_certificates(tmp_path / "other", ["127.0.0.1"])

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(ours.server_cert, ours.server_key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    flower_said = "Connection to the SuperLink is unavailable. Please check your network"
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        wrong = unavailable_why(FlowerConnection(address, other.ca_cert), flower_said)
        assert "CERTIFICATE_VERIFY_FAILED" in wrong and str(other.ca_cert) in wrong, wrong
        assert unavailable_why(FlowerConnection(address, ours.ca_cert), flower_said) == ""
        assert unavailable_why(FlowerConnection(address, other.ca_cert), "Invalid port") == ""
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused
        down = unavailable_why(FlowerConnection(address, ours.ca_cert), flower_said)
    assert "Connection refused" in down and "certificate" not in down, down


def test_the_docs_flwr_configuration_is_the_one_fedroc_writes_for_its_own_flwr_calls(
    tmp_path,
) -> None:
    """docs/flower.md tells the operator to remove a rotated key's node with `flwr supernode
    ls` and `flwr supernode unregister`, which need the SuperLink in Flower's configuration;
    without it `flwr supernode ls` started a local simulation SuperLink (and failed: no
    `flower-superlink` on PATH). The docs now give the entry; it must be the one fedroc
    writes for the same SuperLink (FlowerConnection.flower_config)."""
    import tomllib

    from fedroc.federation.flower.deploy import FlowerConnection

    text = (Path(__file__).parents[1] / "docs" / "flower.md").read_text()
    block = text.split("```toml\n  [superlink]\n", 1)[1].split("```", 1)[0]
    documented = tomllib.loads("[superlink]\n" + block.replace("\n  ", "\n"))
    link = documented["superlink"][documented["superlink"]["default"]]
    connection = FlowerConnection(link["address"], Path(link["root-certificates"]))
    assert tomllib.loads(connection.flower_config()) == documented


def test_supernode_takes_the_sites_whole_policy_from_a_policy_file(
    monkeypatch, capsys, tmp_path
) -> None:
    """`fedroc flower supernode`, the node docs/flower.md recommends, took only the policy
    options it has (--min-count, --allow-noisy, ...): a site could not turn exact releases
    off (allow_exact = false) or raise secagg_min_sites; only the stock node's node config
    reached a policy-file."""
    import tomllib

    import fedroc.federation.flower.node as node

    monkeypatch.setattr(node, "supervise", lambda args, **_: 0)
    monkeypatch.setattr("fedroc.cli.flower_cmd._check_port", lambda port: None)
    policy = tmp_path / "policy.toml"
    policy.write_text("[policy]\nmin_count = 7\nallow_exact = false\nsecagg_min_sites = 4\n")
    base = ["flower", "supernode", "--superlink", "127.0.0.1:9093", "--insecure"]
    site = _site(tmp_path)
    code, _, err = run_main(capsys, [*base, *site, "--policy-file", str(policy)])
    assert code == 0, err
    config = tomllib.loads((tmp_path / "node" / "node-config.toml").read_text())
    assert config["policy-file"] == str(policy) and "min-count" not in config
    parsed = SiteNodeConfig.from_node_config(config).policy
    assert (parsed.min_count, parsed.allow_exact, parsed.secagg_min_sites) == (7, False, 4)
    both = [*base, *site, "--policy-file", str(policy), "--min-count", "10"]
    _refused(capsys, both, "--policy-file", "--min-count", "not both")
    missing = [*base, *site, "--policy-file", str(tmp_path / "nowhere.toml")]
    _refused(capsys, missing, "nowhere.toml", "does not exist")


def test_a_stopped_deployment_says_to_start_it_again(monkeypatch, capsys, tmp_path) -> None:
    """`flower run --deployment DIR` after `flower up` had stopped said only Flower's
    "Connection to the SuperLink is unavailable" and the direct check's "Connection
    refused"; now also what to run. (Here submit_job fails as it does then: the words of
    `flwr run` and of a direct check of a port nothing listens on.)"""
    import fedroc.federation.flower.deploy as deploy
    from fedroc.exceptions import FedrocError

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused
        connection = deploy.FlowerConnection(address, insecure=True)
        (tmp_path / "connection.json").write_text(json.dumps(connection.to_dict()))
        flower_said = "Connection to the SuperLink is unavailable. Please check your network"
        why = deploy.unavailable_why(connection, flower_said)

    def refused(*args: object, **kwargs: object) -> None:
        raise FedrocError(
            f"`flwr run` started no run at the SuperLink {address}: {flower_said}{why}"
        )

    monkeypatch.setattr(deploy, "submit_job", refused)
    args = ["flower", "run", "--deployment", str(tmp_path), "--method", "histogram"]
    code, _, err = run_main(capsys, args)
    line = " ".join(err.split())
    assert code != 0 and "Connection refused" in line, err
    assert f"start it again with `fedroc flower up --dir {tmp_path}`" in line, line
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_an_unregistered_supernode_says_to_register_its_key(tmp_path) -> None:
    """An unregistered SuperNode exited with Flower's "Failed to activate SuperNode" alone,
    restarted every 1-30 s; now a line after Flower's says what the SuperLink's operator
    runs (Flower itself unchanged: a handler on its logger)."""
    import logging

    from flwr.common.logger import log as flower_log

    from fedroc.federation.flower.node import add_activation_hint

    node = tmp_path / "node"
    node.mkdir()
    (node / "node-config.toml").write_text('site = "north"\n')
    args = ["--superlink", "127.0.0.1:9093", "--node-config", str(node / "node-config.toml")]
    args += ["--auth-supernode-private-key", str(node / "node-auth.key")]
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    keep = Keep()
    ours = logging.getLogger("fedroc.flower")
    ours.addHandler(keep)
    hint = add_activation_hint(args)
    try:
        flower_log(logging.INFO, "Starting Flower SuperNode")
        assert said == []
        flower_log(
            logging.ERROR,
            "Exit Code: 305\nFailed to initialize the connection to the SuperLink.\n"
            "[code: 2004] Failed to activate SuperNode.",
        )
    finally:
        logging.getLogger("flwr").removeHandler(hint)
        ours.removeHandler(keep)
    assert len(said) == 1, said
    register = (
        "fedroc flower register --superlink 127.0.0.1:9093 --root-certificates CA "
        f"--site-key north={node / 'node-auth.pub'}"
    )
    assert register in said[0], said


@pytest.mark.parametrize("bins", [None, 10])
def test_a_moments_job_with_bins_says_what_its_clear_curve_costs_the_sites(
    monkeypatch, capsys, tmp_path, bins
) -> None:
    """`flower run --job moments --bins N` asks every site for its calibration curve in the
    clear, after which each refuses rocglm's and histogram's secure binned counts for its
    ledger's lifetime. Only docs/flower.md said so; the walkthrough ran it first and lost
    both methods at every site. Now a note on stderr says it before the job is sent; without
    --bins, no note."""
    import fedroc.federation.flower.deploy as deploy
    from fedroc.exceptions import FedrocError

    sent: list[object] = []

    def stop(*args: object, **kwargs: object) -> None:
        sent.append(args)
        raise FedrocError("stopped here by the test")

    monkeypatch.setattr(deploy, "submit_job", stop)
    args = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure", "--job", "moments"]
    code, out, err = run_main(capsys, args + ([] if bins is None else ["--bins", str(bins)]))
    assert code != 0 and sent, (out, err)
    said = " ".join(err.split())
    assert ("refuses, for its ledger's lifetime, the secure binned counts" in said) == (
        bins is not None
    ), err
    assert "Traceback" not in err
