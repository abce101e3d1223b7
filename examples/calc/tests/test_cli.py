from calc.__main__ import main


def test_the_cli_prints_the_value(capsys):
    assert main(["x + 1", "x=2"]) == 0
    assert capsys.readouterr().out == "3\n"


def test_the_cli_reports_errors_with_exit_code_1(capsys):
    assert main(["1 +"]) == 1
    assert "error:" in capsys.readouterr().err
