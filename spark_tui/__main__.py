from spark_tui.entry import main

raise SystemExit(main())
