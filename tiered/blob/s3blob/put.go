package s3blob

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stratamesh/strata/tiered/blob/internal/driver"
)

// abortTimeout bounds the AbortMultipartUpload sent after a failed
// upload, which runs even when the Put's ctx was cancelled.
const abortTimeout = 30 * time.Second

// Put implements blob.Store. A body of at most PartSize bytes is sent
// with one PutObject; a longer one (or one of unknown size that turns out
// longer) with a multipart upload of PartSize parts, sent one after the
// other from one in-memory buffer, and aborted on any error so that no
// object and no stored parts remain. Either way the object appears only
// when the last request succeeds.
func (s *Store) Put(ctx context.Context, name string, r io.Reader, size int64) error {
	key, err := s.key(ctx, "put", name)
	if err != nil {
		return err
	}
	body := bufio.NewReader(driver.NewBody(ctx, r, size))
	var buf bytes.Buffer
	if size >= 0 {
		buf.Grow(int(min(size, s.partSize)))
	}
	n, err := io.CopyN(&buf, body, s.partSize)
	if err != nil && err != io.EOF {
		return fmt.Errorf("s3blob: put %q: %w", name, err)
	}
	if err == nil {
		// A full part: is there more?
		if _, perr := body.Peek(1); perr == nil {
			if err := s.putMultipart(ctx, key, body, &buf); err != nil {
				return fmt.Errorf("s3blob: put %q (multipart) in bucket %s: %w", name, s.bucket, err)
			}
			return nil
		} else if perr != io.EOF {
			return fmt.Errorf("s3blob: put %q: %w", name, perr)
		}
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &key,
		Body:          bytes.NewReader(buf.Bytes()),
		ContentLength: aws.Int64(n),
	})
	if err != nil {
		return s.wrap("put", name, err)
	}
	return nil
}

// putMultipart uploads first (a full part) and the rest of body as a
// multipart upload, aborting it on error.
func (s *Store) putMultipart(ctx context.Context, key string, body io.Reader, buf *bytes.Buffer) (err error) {
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		_, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: &s.bucket, Key: &key, UploadId: up.UploadId,
		})
		if aerr != nil {
			err = errors.Join(err, fmt.Errorf("aborting upload %s: %w", aws.ToString(up.UploadId), aerr))
		}
	}()
	var parts []types.CompletedPart
	for num := int32(1); ; num++ {
		if num > MaxParts {
			return fmt.Errorf("more than %d parts of %d bytes", MaxParts, s.partSize)
		}
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:        &s.bucket,
			Key:           &key,
			UploadId:      up.UploadId,
			PartNumber:    aws.Int32(num),
			Body:          bytes.NewReader(buf.Bytes()),
			ContentLength: aws.Int64(int64(buf.Len())),
		})
		if err != nil {
			return fmt.Errorf("part %d: %w", num, err)
		}
		parts = append(parts, types.CompletedPart{
			PartNumber:        aws.Int32(num),
			ETag:              out.ETag,
			ChecksumCRC32:     out.ChecksumCRC32,
			ChecksumCRC32C:    out.ChecksumCRC32C,
			ChecksumCRC64NVME: out.ChecksumCRC64NVME,
			ChecksumSHA1:      out.ChecksumSHA1,
			ChecksumSHA256:    out.ChecksumSHA256,
		})
		buf.Reset()
		n, err := io.CopyN(buf, body, s.partSize)
		if err != nil && err != io.EOF {
			return err
		}
		if n == 0 {
			break
		}
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          &s.bucket,
		Key:             &key,
		UploadId:        up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	return err
}
