"""A stand-in family: a room with one probe, one meaning and one check, registered by one line
(``tests/meta/test_family_room.py``), to show that a new family needs nothing outside its room."""
