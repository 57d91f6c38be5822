from lanewatch.cli.entry import main

main()
