"""The published site: the release page over ASV's results, and ASV's pages made to work offline."""
