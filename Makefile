# The two commands of the README, and the opt-in browser test.
.PHONY: demo test test-browser

# The Python of every target: an active virtual or conda environment's, else this project's own
# virtual environment, .venv here (scripts/install.sh makes it on first use; scripts/python.sh).
PYTHON ?= $(shell ./scripts/python.sh)
export PYTHON

# Installs what the demo needs, builds torchutil, and profiles the default model on the best
# device present: resnet50 where torchvision is installed; on a machine without an NVIDIA GPU
# the demo installs PyTorch's CPU wheel, which has no torchvision, and profiles spec_4conv_64
# (a CNN of torchutil.models that needs torch alone).
demo:
	./scripts/install.sh demo
	$(PYTHON) -m torchutil profile

# Installs what the tests need as well (the CUDA build of torch with torchvision, on any
# machine), and runs all tests (ruff, clang-format, GoogleTest through CTest, then pytest).
test:
	./scripts/test.sh

# Installs chromium too, and runs the test that renders the survey's HTML report in it.
test-browser:
	./scripts/install.sh browser
	TORCHUTIL_BROWSER_TESTS=1 $(PYTHON) -m pytest tests/test_survey.py -q -p no:cacheprovider -k browser
