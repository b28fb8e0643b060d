from verimap.cli import main

main()
