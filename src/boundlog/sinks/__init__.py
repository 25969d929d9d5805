"""Where the writer's bytes go: standard streams, files, descriptors, network
connections (TCP, syslog, RELP) and stdlib logging, behind one interface.
"""
