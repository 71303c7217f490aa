"""A `nas evaluate` results db the tests write from row dicts."""
from torchutil.studies import nas_evaluate as ev


def write_db(path, rows):
    """Writes `rows` (dicts with every column) into a new results db at `path`; returns path."""
    con = ev.connect(path)
    ev.insert_rows(con, rows)
    con.close()
    return path
