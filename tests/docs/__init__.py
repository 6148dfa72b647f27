"""The documentation's machinery (`make docs`, `python -m tests.docs`): the reference
pages made from the code (`reference`), and the shell examples of README.md and
docs/ found (`blocks`), run in a folder of their own (`session`) and compared with
what they show, volatile parts aside (`normalise`)."""
