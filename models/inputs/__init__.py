"""What turns a user's text into a model's input.

    text.py   cleaning, word splitting, vocabularies and the word and character tokenizers
    data.py   readers of labelled texts and corpora, splits, and the batches of an epoch

`from models import text, data` reaches them; so does `models.inputs.text`.
"""
