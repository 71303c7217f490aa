# The two commands of the README.
.PHONY: demo test install

# Installs everything and profiles the default model (resnet50) on the best device present.
demo: install
	python3 -m torchutil profile

# Installs everything and runs all tests (GoogleTest through CTest, then pytest).
test:
	./scripts/test.sh

install:
	./scripts/install.sh
