"""The MCP face: `app` builds the server; one thin module per tool family; `registry` lists them."""
