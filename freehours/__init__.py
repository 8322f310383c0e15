"""freehours: metering-to-billing for daily free-energy windows (the Solar Sharer Offer)."""

__version__ = "0.1.0"
