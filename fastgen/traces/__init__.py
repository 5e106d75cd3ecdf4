"""The read side: trace files as inference-perf reads them, the requests it sends, and their token blocks. It never
imports the generator: it reads any OTel corpus inference-perf reads."""
