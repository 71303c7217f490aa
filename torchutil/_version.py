"""The version of torchutil, in one place: torchutil.__version__ and setup.py (which reads this
file as text, without importing torchutil) take it from here."""
__version__ = "0.1.0"
