-- Now playing (docs/behaviour.md §11): the title set by the API, an Icecast source's metadata call or its
-- stream's tags; JSON {title, artist, album, url, artworkUrl, startedAt} or NULL.
ALTER TABLE streams ADD COLUMN now_playing TEXT;
