-- Daily device-id salts, durable: a Redis that loses its data must not hand out a second
-- salt for the same day (the same visitor would get two device ids). Redis is the fallback.
CREATE TABLE device_salts (
  day   date PRIMARY KEY,
  salt  text NOT NULL
);
