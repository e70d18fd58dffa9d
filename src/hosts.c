/*-------------------------------------------------------------------------
 *
 * hosts.c
 *		  ctas_fed.allowed_hosts: which hosts the catalogs of non-superusers
 *		  may reach, for both kinds of catalog.
 *
 * The setting is a comma-separated list of host names, IP addresses and
 * address/prefix-length entries.  While it is empty every host is allowed.
 * It is checked twice: when a non-superuser sets a server option naming
 * a host (the validator, CtasCheckHostOption), and on every connection of
 * a catalog whose server a non-superuser owns (CtasCheckCatalogHosts),
 * since the setting may have changed since the server was created.  The
 * same goes for the host of a catalog's notify_url: the notifier asks
 * CtasNotifyHostRefused before each webhook it sends for such a server.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/hosts.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <curl/curl.h>

#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "miscadmin.h"

#include "hosts.h"

/*
 * ctas_fed.allowed_hosts, defined in guc.c with the other settings; the
 * variable lives here, with its only reader, so that this file calls
 * nothing of ours.
 */
char	   *CtasAllowedHosts = NULL;

static bool hosts_next_entry(const char **p, char *buf, size_t bufsize);
static bool hosts_entry_valid(const char *entry);
static bool hosts_entry_matches(const char *entry, const char *host);
static void hosts_check_host(const CtasCatalog *catalog, const char *option,
							 const char *host);
static const char *hosts_server_option(const CtasCatalog *catalog,
									   const char *name);

/*
 * hosts_next_entry
 *		Copy the next comma-separated entry of *p, blanks trimmed, into buf
 *		and advance *p.  Returns false at the end of the list.  An entry
 *		too long for buf comes back truncated to "", which no check
 *		accepts.
 */
static bool
hosts_next_entry(const char **p, char *buf, size_t bufsize)
{
	const char *s = *p;
	const char *e;
	size_t		len;

	while (*s == ' ' || *s == '\t' || *s == ',')
		s++;
	if (*s == '\0')
	{
		*p = s;
		return false;
	}
	e = s;
	while (*e != '\0' && *e != ',')
		e++;
	*p = e;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	len = e - s;
	if (len >= bufsize)
		len = 0;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return true;
}

/*
 * hosts_parse_addr
 *		Parse an IPv4 or IPv6 address literal (IPv6 with or without
 *		brackets) into addr (16 bytes); returns the address family, or 0
 *		when text is no address literal.
 */
static int
hosts_parse_addr(const char *text, unsigned char *addr)
{
	char		buf[64];
	size_t		len = strlen(text);

	if (len >= 2 && text[0] == '[' && text[len - 1] == ']')
	{
		if (len - 2 >= sizeof(buf))
			return 0;
		memcpy(buf, text + 1, len - 2);
		buf[len - 2] = '\0';
	}
	else
		strlcpy(buf, text, sizeof(buf));
	if (inet_pton(AF_INET, buf, addr) == 1)
		return AF_INET;
	if (inet_pton(AF_INET6, buf, addr) == 1)
		return AF_INET6;
	return 0;
}

/*
 * hosts_split_entry
 *		Split an entry of ctas_fed.allowed_hosts: an address with an
 *		optional /prefix length (then *family, addr and *bits are set), or
 *		a host name (*family = 0).  Returns false for a malformed entry.
 */
static bool
hosts_split_entry(const char *entry, int *family, unsigned char *addr,
			   int *bits)
{
	char		buf[NAMEDATALEN * 4];
	const char *slash = strchr(entry, '/');
	const char *c;

	*family = 0;
	*bits = 0;
	if (entry[0] == '\0' || strlen(entry) >= sizeof(buf))
		return false;
	strlcpy(buf, entry, sizeof(buf));
	if (slash != NULL && entry[0] != '/')
	{
		char	   *end;
		long		n;

		buf[slash - entry] = '\0';
		*family = hosts_parse_addr(buf, addr);
		if (*family == 0)
			return false;
		errno = 0;
		n = strtol(slash + 1, &end, 10);
		if (errno != 0 || end == slash + 1 || *end != '\0' || n < 0 ||
			n > (*family == AF_INET ? 32 : 128))
			return false;
		*bits = (int) n;
		return true;
	}
	*family = hosts_parse_addr(buf, addr);
	if (*family != 0)
	{
		*bits = *family == AF_INET ? 32 : 128;
		return true;
	}
	/* a host name (or a socket directory, as libpq's host takes it) */
	for (c = entry; *c; c++)
	{
		if (*c == ' ' || *c == '\t' || (unsigned char) *c < 0x20)
			return false;
	}
	return true;
}

static bool
hosts_entry_valid(const char *entry)
{
	int			family;
	unsigned char addr[16];
	int			bits;

	return hosts_split_entry(entry, &family, addr, &bits);
}

/*
 * hosts_entry_matches
 *		Does host (a name or an address literal, as written in a catalog's
 *		options) match one entry of ctas_fed.allowed_hosts?  Names are
 *		compared case-insensitively and never resolved; an address literal
 *		matches an address entry of its family whose first bits agree.
 */
static bool
hosts_entry_matches(const char *entry, const char *host)
{
	int			efamily;
	int			hfamily;
	unsigned char eaddr[16];
	unsigned char haddr[16];
	int			bits;
	int			i;

	if (!hosts_split_entry(entry, &efamily, eaddr, &bits))
		return false;
	hfamily = hosts_parse_addr(host, haddr);
	if (efamily == 0 || hfamily == 0)
		return efamily == 0 && hfamily == 0 && pg_strcasecmp(entry, host) == 0;
	if (efamily != hfamily)
		return false;
	for (i = 0; i < bits / 8; i++)
	{
		if (eaddr[i] != haddr[i])
			return false;
	}
	if (bits % 8 != 0)
	{
		unsigned char mask = (unsigned char) (0xff << (8 - bits % 8));

		if ((eaddr[i] & mask) != (haddr[i] & mask))
			return false;
	}
	return true;
}

/*
 * CtasAllowedHostsCheck
 *		GUC check hook of ctas_fed.allowed_hosts: every entry must be a
 *		host name, an IPv4 or IPv6 address, or an address/prefix length.
 */
bool
CtasAllowedHostsCheck(char **newval, void **extra, GucSource source)
{
	const char *p = *newval;
	char		entry[NAMEDATALEN * 4];

	if (p == NULL)
		return true;
	while (hosts_next_entry(&p, entry, sizeof(entry)))
	{
		if (!hosts_entry_valid(entry))
		{
			GUC_check_errdetail("Entry \"%s\" is neither a host name nor an IP address with an optional prefix length.",
								entry);
			return false;
		}
	}
	return true;
}

/*
 * hosts_limited
 *		Does ctas_fed.allowed_hosts list anything?  A setting of blanks and
 *		commas only is as empty as ''.
 */
static bool
hosts_limited(void)
{
	const char *p = CtasAllowedHosts;
	char		entry[NAMEDATALEN * 4];

	return p != NULL && hosts_next_entry(&p, entry, sizeof(entry));
}

/*
 * hosts_allowed
 *		Is host (a name or an address literal) one that non-superusers'
 *		catalogs may reach?  Any host is while ctas_fed.allowed_hosts is
 *		empty.
 */
static bool
hosts_allowed(const char *host)
{
	const char *p = CtasAllowedHosts;
	char		entry[NAMEDATALEN * 4];

	if (!hosts_limited())
		return true;
	while (hosts_next_entry(&p, entry, sizeof(entry)))
	{
		if (hosts_entry_matches(entry, host))
			return true;
	}
	return false;
}

/*
 * hosts_url_host
 *		The host of an http(s) URL, IPv6 brackets removed; palloc'd, or
 *		NULL when curl cannot parse the URL.
 */
static char *
hosts_url_host(const char *url)
{
	CURLU	   *h = curl_url();
	char	   *part = NULL;
	char	   *host = NULL;

	if (h == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (curl_url_set(h, CURLUPART_URL, url,
					 CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
		curl_url_get(h, CURLUPART_HOST, &part, 0) == CURLUE_OK)
	{
		size_t		len = strlen(part);

		if (len >= 2 && part[0] == '[' && part[len - 1] == ']')
			host = pnstrdup(part + 1, len - 2);
		else
			host = pstrdup(part);
		curl_free(part);
	}
	curl_url_cleanup(h);
	return host;
}

/*
 * hosts_check_host
 *		ereport(ERROR) unless host may be reached by a non-superuser's
 *		catalog.  catalog is NULL when a server's options are validated.
 */
static void
hosts_check_host(const CtasCatalog *catalog, const char *option,
			  const char *host)
{
	if (host != NULL && hosts_allowed(host))
		return;
	if (catalog != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("catalog \"%s\" may not connect to host \"%s\"",
						catalog->name, host ? host : ""),
				 errdetail("The owner of the catalog's server is not a superuser, and option \"%s\" names a host that \"ctas_fed.allowed_hosts\" does not list.",
						   option),
				 errhint("A superuser can add the host to the setting \"ctas_fed.allowed_hosts\".")));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("host \"%s\" in option \"%s\" is not allowed",
					host ? host : "", option),
			 errdetail("Non-superusers may only name hosts that \"ctas_fed.allowed_hosts\" lists."),
			 errhint("A superuser can add the host to the setting \"ctas_fed.allowed_hosts\".")));
}

/*
 * hosts_check_host_option
 *		Check every host that option opt names, as its option table says:
 *		each host of a list of names, the host of a URL, the host of each
 *		URL of a list.
 */
static void
hosts_check_host_option(const CtasCatalog *catalog, const CtasOption *opt,
						const char *value)
{
	switch (opt->hosts)
	{
		case CTAS_HOSTS_NONE:
			break;
		case CTAS_HOSTS_NAMES:
			{
				const char *p = value;
				char		entry[NAMEDATALEN * 4];
				bool		any = false;

				while (hosts_next_entry(&p, entry, sizeof(entry)))
				{
					hosts_check_host(catalog, opt->name, entry);
					any = true;
				}
				if (!any)
					hosts_check_host(catalog, opt->name, NULL);
				break;
			}
		case CTAS_HOSTS_URL:
			hosts_check_host(catalog, opt->name, hosts_url_host(value));
			break;
		case CTAS_HOSTS_URL_LIST:
			{
				ListCell   *lc;

				foreach(lc, CtasSplitUrlList(value))
					hosts_check_host(catalog, opt->name,
									 hosts_url_host(lfirst(lc)));
				break;
			}
	}
}

/*
 * hosts_server_option
 *		Value of server option name of the catalog, or NULL.  Options that
 *		name hosts are server options only (the validators refuse them on a
 *		user mapping), so the user mapping is not searched; reading the
 *		list here keeps this file from calling back into catalog.c, which
 *		calls it.  Never ERRORs.
 */
static const char *
hosts_server_option(const CtasCatalog *catalog, const char *name)
{
	ListCell   *lc;

	foreach(lc, catalog->server_options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);

		if (strcmp(def->defname, name) == 0)
			return defGetString(def);
	}
	return NULL;
}

/*
 * CtasCheckHostOption
 *		Validator side of ctas_fed.allowed_hosts: ereport(ERROR) when a
 *		non-superuser sets a server option whose table entry says it names
 *		hosts (opt->hosts) to a host the setting does not list.  The caller
 *		checks superuser().
 */
void
CtasCheckHostOption(const CtasOption *opt, const char *value)
{
	if (!hosts_limited())
		return;
	hosts_check_host_option(NULL, opt, value);
}

/*
 * CtasCheckCatalogHosts
 *		Connect side of ctas_fed.allowed_hosts, for every kind of catalog:
 *		when the setting is not empty and the catalog's server belongs to a
 *		non-superuser, the options of its target's option table (options,
 *		NULL-name terminated) that name the hosts it connects to (kinds
 *		CTAS_HOSTS_NAMES and CTAS_HOSTS_URL) must name listed hosts, and a
 *		catalog that names none (libpq's default, a local socket) is
 *		refused.  The URLs of a list are checked where each is used
 *		(CtasCheckCatalogUrl).  The setting may have changed since the
 *		server was created, so every connection checks again.
 *		ereport(ERROR) when refused.
 */
void
CtasCheckCatalogHosts(const CtasCatalog *catalog, const CtasOption *options)
{
	const CtasOption *opt;
	const CtasOption *first = NULL;
	bool		any = false;

	if (!hosts_limited())
		return;
	if (superuser_arg(GetForeignServer(catalog->serverid)->owner))
		return;
	for (opt = options; opt->name; opt++)
	{
		const char *value;

		if (opt->hosts != CTAS_HOSTS_NAMES && opt->hosts != CTAS_HOSTS_URL)
			continue;
		if (first == NULL)
			first = opt;
		value = hosts_server_option(catalog, opt->name);
		if (value == NULL)
			continue;
		hosts_check_host_option(catalog, opt, value);
		any = true;
	}
	if (!any)
		hosts_check_host(catalog, first ? first->name : "", NULL);
}

/*
 * CtasNotifyHostRefused
 *		Send side of ctas_fed.allowed_hosts, for the webhook url of a
 *		catalog whose server a non-superuser owns: NULL when the setting,
 *		as this process sees it, allows url's host, else that host
 *		(palloc'd; "" for a URL curl cannot parse) for the message.  Only
 *		the host is returned, never the rest of the URL.  Can ERROR only
 *		when out of memory.
 */
char *
CtasNotifyHostRefused(const char *url)
{
	char	   *host;

	if (!hosts_limited())
		return NULL;
	host = hosts_url_host(url);
	if (host == NULL)
		return pstrdup("");
	if (hosts_allowed(host))
	{
		pfree(host);
		return NULL;
	}
	return host;
}

/*
 * CtasSplitUrlList
 *		The URLs of a comma-separated list (a server option of kind
 *		CTAS_OPT_SERVICE_URL_LIST), blanks trimmed, as a List of palloc'd
 *		strings in list order; NIL when the list is empty or has an empty
 *		entry.  Never ERRORs (but out of memory).
 */
List *
CtasSplitUrlList(const char *value)
{
	List	   *urls = NIL;
	const char *p = value;

	for (;;)
	{
		const char *e = strchr(p, ',');
		const char *s = p;
		const char *end = e ? e : p + strlen(p);

		while (s < end && (*s == ' ' || *s == '\t'))
			s++;
		while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if (end == s)
			return NIL;
		urls = lappend(urls, pnstrdup(s, end - s));
		if (e == NULL)
			return urls;
		p = e + 1;
	}
}

/*
 * CtasCheckCatalogUrl
 *		Connect side of ctas_fed.allowed_hosts for a URL that a catalog's
 *		option names beside url (each entry of a list of URLs): ERROR as
 *		CtasCheckCatalogHosts when the setting is not empty, the catalog's
 *		server belongs to a non-superuser and the URL's host is not listed.
 */
void
CtasCheckCatalogUrl(const CtasCatalog *catalog, const char *option,
					const char *url)
{
	if (!hosts_limited())
		return;
	if (superuser_arg(GetForeignServer(catalog->serverid)->owner))
		return;
	hosts_check_host(catalog, option, hosts_url_host(url));
}
