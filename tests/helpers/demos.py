"""The classify demo as the tests run it: main in this process with its printout captured,
and the pattern of its final line."""
import contextlib
import io
import re

from demos import classify

# groups: the ensemble's (the demo's result), the transformer's and the baseline's accuracy
# in percent, and the number of test reviews
FINAL_LINE = re.compile(r"test accuracy: ensemble \(mean probability\) ([\d.]+)%, transformer "
                        r"([\d.]+)%, bag-of-words baseline \(TF-IDF words and pairs\) "
                        r"([\d.]+)% \(([\d,]+) reviews?\)")


def run_classify(*argv):
    """classify.main(argv) with its printout captured: -> (main's result, the printed lines)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        result = classify.main([str(a) for a in argv])
    return result, printed.getvalue().splitlines()
