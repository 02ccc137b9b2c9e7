print("halftunesctl")
