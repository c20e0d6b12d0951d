// One HTTP transfer through libcurl's easy interface, behind a plain C header (no curl types
// leak to Swift: curl_easy_setopt is variadic, which Swift cannot call). The transfer blocks the
// calling thread, waiting on its sockets (poll), so a long request costs no CPU while it waits.
#ifndef CCURL_H
#define CCURL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sb_http_request {
	const char *method;            // "GET", "POST", "PUT", "HEAD", ...
	const char *url;
	const char *const *headers;    // "Name: value" lines
	size_t header_count;
	const void *body;              // sent as is when non-NULL (body_length bytes)
	size_t body_length;
	const char *body_path;         // or a file's bytes from body_offset, body_length of them
	uint64_t body_offset;
	const char *aws_sigv4;         // "aws:amz:REGION:s3" to sign with AWS Signature V4, or NULL
	const char *user_password;     // "ACCESS:SECRET" for the signature (or basic auth)
	long connect_timeout_ms;       // 0: libcurl's default
	long timeout_ms;               // the whole transfer; 0: none
	long stall_ms;                 // no byte either way for this long: cut (a hung peer); 0: never
	int64_t max_send_bytes_per_second; // 0: no limit
	const volatile int *cancel;    // when it reads non-zero, the transfer stops (SB_HTTP_CANCELLED)
} sb_http_request;

typedef struct sb_http_response {
	long status;                   // HTTP status, 0 when none came
	char *body;                    // malloc'd, NUL-terminated; free with sb_http_response_free
	size_t body_length;
	char *headers;                 // the final response's header lines, malloc'd
	size_t headers_length;
	int code;                      // 0 (done), a CURLcode, or SB_HTTP_CANCELLED
	int connect_failed;            // 1 when no connection was made (refused, unresolved, timed out)
	char error[256];               // what went wrong, for a person
} sb_http_response;

#define SB_HTTP_CANCELLED (-1)

/// Performs one request; fills `out` (always: free it). Returns out->code.
int sb_http_perform(const sb_http_request *request, sb_http_response *out);
void sb_http_response_free(sb_http_response *response);
/// The libcurl version the program runs with ("7.88.1").
const char *sb_http_curl_version(void);

/// MD5 (OpenSSL's libcrypto, which libcurl already brings) of `length` bytes of the file at
/// `path` from `offset`, into `digest` (16 bytes); reads in 1 MiB pieces. 0 when done, else
/// an errno (ENODATA: the file is shorter than asked).
int sb_md5_file(const char *path, uint64_t offset, uint64_t length, uint8_t digest[16]);
/// The calling thread's nice value set to `nice` (Linux keeps one per thread): 0 or an errno.
int sb_thread_nice(int nice);
/// MD5 of bytes in memory (a multipart upload's ETag is the MD5 of its parts' digests).
void sb_md5_bytes(const void *bytes, size_t length, uint8_t digest[16]);

#ifdef __cplusplus
}
#endif
#endif
