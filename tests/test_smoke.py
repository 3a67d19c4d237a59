from fedroc.cli import main


def test_demo_runs(capsys):
    main(["demo", "--json"])
    assert '"reference"' in capsys.readouterr().out
