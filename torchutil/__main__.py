from torchutil.cli import main

raise SystemExit(main())
