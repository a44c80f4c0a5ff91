"""The S3 endpoint the suite runs (moto's server over HTTP) behaves like S3 where staging relies on it."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

pytestmark = pytest.mark.integration


def test_put_get_and_conditional_create(s3_endpoint: str, s3_bucket: str) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.put_object(Bucket=s3_bucket, Key="a/b.csv", Body=b"x,y\n", IfNoneMatch="*")
    assert s3.get_object(Bucket=s3_bucket, Key="a/b.csv")["Body"].read() == b"x,y\n"
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=s3_bucket, Key="a/b.csv", Body=b"other", IfNoneMatch="*")
    assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=s3_bucket, Key="a/b.csv")["Body"].read() == b"x,y\n"
