# The two commands of the README.
.PHONY: demo test

# Installs what the demo needs, builds torchutil, and profiles the default model (resnet50) on
# the best device present.
demo:
	./scripts/install.sh demo
	python3 -m torchutil profile

# Installs what the tests need as well, and runs all tests (GoogleTest through CTest, then pytest).
test:
	./scripts/test.sh
