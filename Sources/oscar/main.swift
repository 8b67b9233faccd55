print("oscar")
