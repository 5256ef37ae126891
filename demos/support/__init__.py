"""What the demos share and the parts each is built from, apart from the programs themselves
(`python -m demos.<name>`):

    common.py        the options every demo has, their checks, the output folder, the final line
    runs.py          a training run's life: --resume, Ctrl-C, a diverging run, --model
    program.py       how a demo ends as a program (standard library only: imported before numpy)
    number_words.py  translate's task: numbers in digits, to English words
    reviews.py       classify's generated reviews; review_files.py a user's file of them
    length_buckets.py  classify's batches of reviews of similar length
    baseline.py      classify's TF-IDF logistic regression; ensemble.py the two models together
    ngram.py         generate's Kneser-Ney character n-grams
    torch_steps.py   to_torch's PyTorch steps; to_torch_ddp.py its workers under DDP
    browser.py       headless Chromium, for the explorer's tests and screenshot
"""
