"""`cronlog-dev bench`: burst and steady workloads on cronlog and on pgqueuer, side by side.

It measures; it does not tune. Every workload is bounded in count and time and reports
what it reached within its time cap.
"""
