"""Programs over the library: mqadmin (the admin tool, one command table) and mqstore (a store
directory read without a broker). Nothing in sidewinder imports them.

    python -m sidewinder.tools.mqadmin topicList -n 127.0.0.1:9876
    python -m sidewinder.tools.mqstore verify ./store
"""
