from gitaudit.cli.entry import main

main()
