"""The version of fastgen: recorded in every manifest, so a change to the output's format bumps it."""

__version__ = "0.4.0"
