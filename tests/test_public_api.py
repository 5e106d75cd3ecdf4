import fastgen


def test_public_surface_is_the_sorted_all_and_nothing_is_missing():
    assert fastgen.__all__ == sorted(fastgen.__all__)
    for name in fastgen.__all__:
        assert getattr(fastgen, name) is not None, name


def test_importing_fastgen_does_not_import_inference_perf():
    import subprocess
    import sys

    code = "import sys, fastgen; print('inference_perf' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
