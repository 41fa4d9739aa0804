from mbb.cli import main

raise SystemExit(main())
