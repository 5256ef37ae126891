"""The classify demo as the tests run it: main in this process with its printout captured,
and the pattern of its final line."""
import contextlib
import io
import re

from demos import classify

FINAL_LINE = re.compile(r"test accuracy: transformer ([\d.]+)%, bag-of-words baseline "
                        r"\(TF-IDF words and pairs\) ([\d.]+)% \(([\d,]+) reviews?\)")


def run_classify(*argv):
    """classify.main(argv) with its printout captured: -> (main's result, the printed lines)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        result = classify.main([str(a) for a in argv])
    return result, printed.getvalue().splitlines()
