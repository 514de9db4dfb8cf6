"""The main job (``envsched-gnn run``): presets, the job itself, the packaged SFT policy it
starts from, and their commands."""
