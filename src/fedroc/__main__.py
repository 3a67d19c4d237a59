from fedroc.cli import main

main()
