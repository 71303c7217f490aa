from torchutil.studies.cli import main

raise SystemExit(main())
