print("halftunesd")
