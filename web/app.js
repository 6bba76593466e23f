/* app.js -- the attune dashboard (filled in by the next commit). */
