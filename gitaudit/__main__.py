from gitaudit.cli import main

main()
