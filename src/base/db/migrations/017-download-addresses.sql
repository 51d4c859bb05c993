-- Download counting per address (docs/podcasts.md "Download counting"): an address group showing
-- more than 10 User-Agents on one episode in a day is one client, so the day's client progress
-- keeps the address group's hash (HMAC under the day's secret, never the address) and the count
-- key of the download each client counted, so that the downloads of a merged address can be taken
-- back. Rows of closed days are deleted as before.
ALTER TABLE download_clients ADD COLUMN address TEXT NOT NULL DEFAULT '';
ALTER TABLE download_clients ADD COLUMN counted_as TEXT;
