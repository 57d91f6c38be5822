from lanewatch.cli.main import main

main()
