"""What the Python benches (pt2_bench.py, pt2_text_bench.py) share: the CPU they name beside
their figures, and their table printed and written with every report."""
import json
import platform


def cpu_name():
    """The CPU's model name (/proc/cpuinfo), else platform.processor()."""
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f
                     if line.startswith("model name")), platform.processor())


def write_results(folder, table_file, lines, reports_file, reports):
    """Prints the table `lines` and writes it to FOLDER/TABLE_FILE, `reports` (as JSON) to
    FOLDER/REPORTS_FILE."""
    table = "\n".join(lines)
    print(table)
    with open(f"{folder}/{table_file}", "w") as f:
        f.write(table + "\n")
    with open(f"{folder}/{reports_file}", "w") as f:
        json.dump(reports, f, indent=1)
