"""The inbox as a publisher sees it: publish a signed message, take back one no
intake has read, the intake's reason for one it refused, a run's request still
waiting, whether an intake is alive — behind one port (`port.Inbox`), with a
Redis adapter and a memory twin that pass the same contract suite."""
